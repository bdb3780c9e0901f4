/* open.c -- opening a user's file without blocking on FIFOs or devices
 * (see open.h). */
#include "base/open.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

const char *ffn_file_kind(mode_t mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a file";
}

ffn_status ffn_open_regular(const char *path, int *fd, struct stat *sb) {
    *fd = -1;
    if (!path) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_open_regular: path is NULL");
    /* O_NONBLOCK: opening a FIFO without a writer returns at once instead
     * of waiting; O_NOCTTY: a terminal never becomes ours. */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (f < 0) return ffn_error(FFN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat s;
    if (fstat(f, &s) != 0) {
        int e = errno;
        close(f);
        return ffn_error(FFN_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(s.st_mode)) {
        close(f);
        return ffn_error(FFN_ERR_IO, "%s is %s, not a regular file", path, ffn_file_kind(s.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(f);
        return ffn_error(FFN_ERR_IO, "%s: cannot clear O_NONBLOCK: %s", path, strerror(e));
    }
    *fd = f;
    if (sb) *sb = s;
    return FFN_OK;
}
