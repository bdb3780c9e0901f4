/* quant_driver.c -- the C side of tests/parity/test_quant.py, compiled by
 * the test against build/libffn.a.  Raw little-endian files in and out.
 *
 *   quant_driver quantize TYPE N IN.f32 OUT.bin     ffn_ggml_quantize_row of N values
 *   quant_driver dequantize TYPE N IN.bin OUT.f32   ffn_ggml_dequantize_row of N values
 *   quant_driver dump FILE.gguf OUTDIR              every metadata value and tensor, as text
 *       on stdout (format below); each tensor ffn decodes goes to OUTDIR/<index>.f32
 * The dump, one line each, tab-separated:
 *   version <v> alignment <a> data_offset <o>
 *   kv <key as hex> <value>
 *   tensor <name> <type> <n_dims> <ne0,ne1,...> <offset> <nbytes>
 * where a value is <type name>:<payload>: integers in decimal, floats as
 * the hex of their bits, bools 0/1, strings as the hex of their bytes, and
 * arrays as [<element type>;<count>;<value>,<value>,...].
 * TYPE is a ggml type name (q8_0, q4_K, ...).  Exit 0 on success, 1 with a
 * message on stderr. */
#include <ffn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what) {
    fprintf(stderr, "quant_driver: %s: %s\n", what, ffn_last_error());
    return 1;
}

static void *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(size > 0 ? (size_t)size : 1);
    if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = (size_t)size;
    return buf;
}

static int spit(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static void hex(const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) printf("%02x", ((const unsigned char *)p)[i]);
}

static void print_value(const ffn_gguf_value *v) {
    printf("%s:", ffn_gguf_vtype_name(v->type));
    switch (v->type) {
    case FFN_GGUF_VTYPE_UINT8: printf("%u", v->v.u8); break;
    case FFN_GGUF_VTYPE_INT8: printf("%d", v->v.i8); break;
    case FFN_GGUF_VTYPE_UINT16: printf("%u", v->v.u16); break;
    case FFN_GGUF_VTYPE_INT16: printf("%d", v->v.i16); break;
    case FFN_GGUF_VTYPE_UINT32: printf("%u", v->v.u32); break;
    case FFN_GGUF_VTYPE_INT32: printf("%d", v->v.i32); break;
    case FFN_GGUF_VTYPE_UINT64: printf("%llu", (unsigned long long)v->v.u64); break;
    case FFN_GGUF_VTYPE_INT64: printf("%lld", (long long)v->v.i64); break;
    case FFN_GGUF_VTYPE_BOOL: printf("%d", v->v.boolean); break;
    case FFN_GGUF_VTYPE_FLOAT32: {
        uint32_t u;
        memcpy(&u, &v->v.f32, 4);
        printf("%08x", u);
        break;
    }
    case FFN_GGUF_VTYPE_FLOAT64: {
        uint64_t u;
        memcpy(&u, &v->v.f64, 8);
        printf("%016llx", (unsigned long long)u);
        break;
    }
    case FFN_GGUF_VTYPE_STRING: hex(v->v.str.ptr, v->v.str.len); break;
    case FFN_GGUF_VTYPE_ARRAY:
        printf("[%s;%llu;", ffn_gguf_vtype_name(v->v.arr.type), (unsigned long long)v->v.arr.count);
        for (uint64_t i = 0; i < v->v.arr.count; i++) {
            ffn_gguf_value e;
            if (ffn_gguf_array_get(&v->v.arr, i, &e) != FFN_OK) {
                printf("?");
                break;
            }
            if (i) printf(",");
            print_value(&e);
        }
        printf("]");
        break;
    }
}

static int dump(const char *path, const char *outdir) {
    ffn_gguf_file *f;
    if (ffn_gguf_open(path, &f) != FFN_OK) return fail("open");
    printf("version\t%u\talignment\t%zu\tdata_offset\t%llu\n", ffn_gguf_version(f), ffn_gguf_alignment(f),
           (unsigned long long)ffn_gguf_data_offset(f));
    for (size_t i = 0; i < ffn_gguf_kv_count(f); i++) {
        ffn_gguf_value v;
        if (ffn_gguf_kv_value(f, i, &v) != FFN_OK) return fail("kv");
        const char *key = ffn_gguf_kv_key(f, i);
        printf("kv\t");
        hex(key, strlen(key));
        printf("\t");
        print_value(&v);
        printf("\n");
    }
    for (size_t i = 0; i < ffn_gguf_count(f); i++) {
        ffn_gguf_tensor t;
        if (ffn_gguf_get_tensor(f, i, &t) != FFN_OK) return fail("tensor");
        printf("tensor\t%s\t%s\t%d\t", t.name, ffn_ggml_type_name(t.type), t.n_dims);
        for (int d = 0; d < t.n_dims; d++) printf("%s%lld", d ? "," : "", (long long)t.ne[d]);
        printf("\t%llu\t%zu\n", (unsigned long long)t.offset, t.nbytes);
        if (ffn_ggml_can_dequantize(t.type)) {
            float *x;
            if (ffn_gguf_load_f32(f, t.name, &x) != FFN_OK) return fail("load_f32");
            char out[4096];
            snprintf(out, sizeof out, "%s/%zu.f32", outdir, i);
            int ok = spit(out, x, (size_t)t.numel * 4);
            free(x);
            if (!ok) return fail("write");
        }
    }
    ffn_gguf_close(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "dump")) return dump(argv[2], argv[3]);
    if (argc != 6) {
        fprintf(stderr, "usage: quant_driver quantize|dequantize TYPE N IN OUT | dump FILE OUTDIR\n");
        return 1;
    }
    ffn_ggml_type type;
    if (!ffn_ggml_type_parse(argv[2], &type)) {
        fprintf(stderr, "quant_driver: unknown type %s\n", argv[2]);
        return 1;
    }
    int64_t n = atoll(argv[3]);
    size_t bytes, in_size;
    if (ffn_ggml_row_size(type, n, &bytes) != FFN_OK) return fail("row size");
    void *in = slurp(argv[4], &in_size);
    if (!in) return fail("read input");
    int quantize = !strcmp(argv[1], "quantize");
    size_t out_size = quantize ? bytes : (size_t)n * 4;
    if (in_size != (quantize ? (size_t)n * 4 : bytes)) {
        fprintf(stderr, "quant_driver: %s holds %zu bytes, expected %zu\n", argv[4], in_size,
                quantize ? (size_t)n * 4 : bytes);
        return 1;
    }
    void *out = malloc(out_size ? out_size : 1);
    ffn_status s = quantize ? ffn_ggml_quantize_row(type, in, out, n) : ffn_ggml_dequantize_row(type, in, out, n);
    if (s != FFN_OK) return fail(argv[1]);
    if (!spit(argv[5], out, out_size)) return fail("write output");
    free(in);
    free(out);
    return 0;
}
