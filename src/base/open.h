/* open.h -- opening a user's file for reading.  Not installed.
 *
 * open(2) on a FIFO blocks until a writer appears, and a character device
 * such as /dev/zero never ends, so every reader of a user's file opens it
 * through ffn_open_regular: the open itself cannot block (O_NONBLOCK,
 * cleared again once the file is known to be regular), and anything but
 * a regular file is refused with a message naming what it is. */
#ifndef FFN_OPEN_H
#define FFN_OPEN_H

#include "base/common.h"

#include <sys/stat.h>

/* What a st_mode is, in words: "a FIFO", "a directory", "a character
 * device", "a block device", "a socket", "a regular file". */
const char *ffn_file_kind(mode_t mode);

/* Open `path` read-only (close-on-exec) if it is a regular file; *fd gets
 * the descriptor, *sb (may be NULL) its fstat.  Errors (FFN_ERR_IO) read
 * "PATH: cannot open: REASON" or "PATH is a FIFO, not a regular file". */
ffn_status ffn_open_regular(const char *path, int *fd, struct stat *sb);

#endif /* FFN_OPEN_H */
