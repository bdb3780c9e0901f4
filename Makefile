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
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -g $(OPT) -fopenmp -fPIC -Iinclude -Isrc
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

$(B)/obj/%.o: %.c $(wildcard include/*.h include/ffn/*.h src/*.h src/*/*.h tools/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(ISA) $(CFLAGS) -c $< -o $@

$(B)/asan/obj/%.o: %.c $(wildcard include/*.h include/ffn/*.h src/*.h src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(ISA) $(SAN) $(CFLAGS) -c $< -o $@

$(B)/libffn.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/libffn.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libffn.so.0 -o $@ $^ $(LDLIBS)

$(B)/asan/libffn.a: $(ASAN_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/ffn: $(TOOL_OBJ) $(B)/libffn.a
	$(CC) -o $@ $(TOOL_OBJ) $(B)/libffn.a $(LDLIBS)

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

# libFuzzer targets (clang): build/fuzz/fuzz_*
fuzz:
	@mkdir -p $(B)/fuzz
	for f in $(FUZZ_SRC); do n=$$(basename $$f .c); \
	  clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
	    -o $(B)/fuzz/$$n $$f $(filter-out %_avx2.c %_avx512.c,$(LIB_SRC)) src/kernels/*_avx2.c src/kernels/*_avx512.c -fopenmp $(LDLIBS) || exit 1; done

install: all
	install -d $(DESTDIR)$(PREFIX)/include/ffn $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/ffn.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 include/ffn/*.h $(DESTDIR)$(PREFIX)/include/ffn/
	install -m 644 $(B)/libffn.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(B)/libffn.so $(DESTDIR)$(PREFIX)/lib/libffn.so.0
	ln -sf libffn.so.0 $(DESTDIR)$(PREFIX)/lib/libffn.so
	install -m 644 $(B)/ffn.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -m 755 $(B)/ffn $(DESTDIR)$(PREFIX)/bin/

clean:
	rm -rf $(B)
