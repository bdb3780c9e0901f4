/* report_assets.h -- the page, stylesheet and scripts of tools/report/,
 * embedded at build time (tools/report/embed.c writes
 * build/gen/report_assets.c); read by ffn report and ffn serve. */
#ifndef FFN_TOOLS_REPORT_ASSETS_H
#define FFN_TOOLS_REPORT_ASSETS_H

#include <stddef.h>

typedef struct report_asset {
    const char *name, *text;
    size_t size;
} report_asset;
extern const report_asset report_assets[];
extern const size_t report_n_assets;

/* The asset whose name is the n bytes at name; NULL when none is. */
const report_asset *report_asset_named(const char *name, size_t n);

#endif
