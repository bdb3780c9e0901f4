# ffn -- one build system: this Makefile.
#   make                 build/ffn, build/libffn.a, build/libffn.so, build/ffn.pc
#   make test            every test (see tests/run.sh); installs nothing
#   make asan            the library and unit tests under ASan + UBSan
#   make bench           benchmarks against PyTorch and the roofline
#   make install PREFIX=/usr/local
# Shipped binaries never use -march=native: SIMD kernels live in *_avx2.c /
# *_avx512.c files compiled for that ISA alone and chosen at run time.

CC      ?= cc
PREFIX  ?= /usr/local
OPT     ?= -O2
# -fvisibility=hidden: libffn.so exports only what the public headers declare
# (each include/ffn/*.h wraps itself in `#pragma GCC visibility push(default)`).
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -g $(OPT) -fopenmp -fPIC -fvisibility=hidden -Iinclude -Isrc
LDLIBS  = -ldnnl -fopenmp -lm -lpthread
ISA_AVX2   = -mavx2 -mfma -mf16c
ISA_AVX512 = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c

LIB_SRC  := $(sort $(wildcard src/*.c src/*/*.c))
TOOL_SRC := $(sort $(wildcard tools/*.c))
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))

B := build
LIB_OBJ  := $(LIB_SRC:%.c=$(B)/obj/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(B)/obj/%.o)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
ASAN_LIB_OBJ := $(LIB_SRC:%.c=$(B)/asan/obj/%.o)
ASAN_UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/asan/tests/%)
SAN = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

.PHONY: all test unit asan bench install clean fuzz
all: $(B)/ffn $(B)/libffn.a $(B)/libffn.so $(B)/ffn.pc

$(B)/obj/%_avx2.o: ISA = $(ISA_AVX2)
$(B)/obj/%_avx512.o: ISA = $(ISA_AVX512)
$(B)/asan/obj/%_avx2.o: ISA = $(ISA_AVX2)
$(B)/asan/obj/%_avx512.o: ISA = $(ISA_AVX512)

$(B)/obj/%.o: %.c $(wildcard include/*.h include/ffn/*.h src/*.h src/*/*.h tools/*.h tools/*.def)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(ISA) $(CFLAGS) -c $< -o $@

$(B)/asan/obj/%.o: %.c $(wildcard include/*.h include/ffn/*.h src/*.h src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(ISA) $(SAN) $(CFLAGS) -c $< -o $@

# Outputs are built under a temporary name and renamed, so a test running
# while the tree rebuilds never sees a half-written binary or archive.
$(B)/libffn.a: $(LIB_OBJ)
	@rm -f $@.tmp
	ar rcs $@.tmp $^ && mv -f $@.tmp $@

$(B)/libffn.so: $(LIB_OBJ) src/libffn.map
	$(CC) -shared -Wl,-soname,libffn.so.0 -Wl,--version-script=src/libffn.map -o $@.tmp $(LIB_OBJ) $(LDLIBS) && mv -f $@.tmp $@

$(B)/asan/libffn.a: $(ASAN_LIB_OBJ)
	@rm -f $@.tmp
	ar rcs $@.tmp $^ && mv -f $@.tmp $@

$(B)/ffn: $(TOOL_OBJ) $(B)/libffn.a
	$(CC) -o $@.tmp $(TOOL_OBJ) $(B)/libffn.a $(LDLIBS) && mv -f $@.tmp $@

$(B)/ffn.pc: Makefile
	@mkdir -p $(B)
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: ffn\nDescription: feed-forward layers of Transformers (dense, GLU family, MoE), forward and backward\nVersion: 0.1.0\nLibs: -L$${libdir} -lffn\nLibs.private: %s\nCflags: -I$${includedir}\n' '$(PREFIX)' '$(LDLIBS)' > $@

$(B)/tests/%: tests/unit/%.c tests/unit/check.h $(B)/libffn.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -Itests/unit -o $@ $< $(B)/libffn.a $(LDLIBS)

$(B)/asan/tests/%: tests/unit/%.c tests/unit/check.h $(B)/asan/libffn.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(SAN) $(CFLAGS) -Itests/unit -o $@ $< $(B)/asan/libffn.a $(LDLIBS)

unit: $(UNIT_BIN)
asan: $(ASAN_UNIT_BIN)

test: all unit asan
	bash tests/run.sh

bench: all
	bash bench/run.sh

# libFuzzer targets (clang, ASan + UBSan): build/fuzz/fuzz_*.  The library
# is rebuilt with clang and the sanitizers into build/fuzz/libffn.a (SIMD
# files keep their ISA flags; a file clang cannot compile is skipped with a
# note); each target links only the objects it uses.  Run one with e.g.
#   build/fuzz/fuzz_json -max_total_time=600 -dict=tests/fuzz/json.dict \
#       build/fuzz/corpus_json tests/fuzz/corpus/fuzz_json
FUZZ_CC ?= clang
FUZZ_FLAGS = -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fopenmp -Wno-pass-failed -Iinclude -Isrc
fuzz:
	@mkdir -p $(B)/fuzz/obj
	@set -e; objs=; \
	for s in $(LIB_SRC); do \
	  o=$(B)/fuzz/obj/$$(echo $$s | tr / _ | sed 's/[.]c$$/.o/'); isa=; \
	  case $$s in *_avx512.c) isa="$(ISA_AVX512)";; *_avx2.c) isa="$(ISA_AVX2)";; esac; \
	  if [ ! -e $$o ] || [ $$s -nt $$o ] || [ -n "$$(find include src -name '*.h' -newer $$o | head -n 1)" ]; then \
	    echo "$(FUZZ_CC) -c $$s"; \
	    $(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $$isa -c $$s -o $$o \
	      || { echo "fuzz: note: skipping $$s (clang could not compile it)"; rm -f $$o; continue; }; \
	  fi; \
	  objs="$$objs $$o"; \
	done; \
	rm -f $(B)/fuzz/libffn.a; ar rcs $(B)/fuzz/libffn.a $$objs
	@set -e; for f in $(FUZZ_SRC); do n=$$(basename $$f .c); echo "$(FUZZ_CC) $$f -> $(B)/fuzz/$$n"; \
	  $(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $(B)/fuzz/$$n $$f $(B)/fuzz/libffn.a $(LDLIBS); done

install: all
	install -d $(DESTDIR)$(PREFIX)/include/ffn $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/ffn.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 include/ffn/*.h $(DESTDIR)$(PREFIX)/include/ffn/
	install -m 644 $(B)/libffn.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(B)/libffn.so $(DESTDIR)$(PREFIX)/lib/libffn.so.0
	ln -sf libffn.so.0 $(DESTDIR)$(PREFIX)/lib/libffn.so
	sed 's|^prefix=.*|prefix=$(PREFIX)|' $(B)/ffn.pc > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ffn.pc
	install -m 755 $(B)/ffn $(DESTDIR)$(PREFIX)/bin/

clean:
	rm -rf $(B)
