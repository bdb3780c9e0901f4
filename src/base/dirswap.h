/* dirswap.h -- the directory swap: how ffn replaces a whole directory
 * (an ffn run directory, an exported model directory) so that a crash at
 * any moment leaves a whole one on disk.  Not installed.
 *
 * A new directory is written under an unpredictable sibling name
 * (DIR.tmp-XXXXXX, made by mkdtemp in DIR's parent), every file and the
 * directory are fsynced, and it is exchanged with DIR in one atomic
 * renameat2(RENAME_EXCHANGE).  The previous contents, now under the
 * temporary name, are retired: the files ffn writes (ffn_dirswap_owned) are
 * deleted, anything else (a metrics log, a user's notes) is moved into the
 * new DIR, and the emptied directory is removed.  Where the file system has
 * no exchange, DIR is renamed to DIR.old, the temporary to DIR, and DIR.old
 * is retired; a crash between the two renames leaves DIR.old whole, and
 * ffn_dirswap_resolve() finds it.
 *
 * What the swap never does: follow a symbolic link while deleting (every
 * removal is unlinkat on a directory opened O_NOFOLLOW|O_DIRECTORY), delete
 * a file whose name it does not own, or write through a name it did not
 * create.  DIR itself may be a symbolic link to a directory: the swap then
 * operates on the directory it points to and leaves the link alone.
 *
 * Writers that replace a directory also hold ffn_dirlock_take() on it for as
 * long as they write, so two processes never swap the same DIR. */
#ifndef FFN_DIRSWAP_H
#define FFN_DIRSWAP_H

#include "base/common.h"

/* a + sep + b, malloc'd (NULL when out of memory). */
char *ffn_path_join(const char *a, const char *sep, const char *b);

/* fsync one file (or directory) by path, after writing it with stdio.
 * File systems that refuse fsync on directories are not an error. */
ffn_status ffn_fsync_path(const char *path, int is_dir);

/* The file names ffn writes into a model or run directory (NULL-ended):
 * the only names the swap deletes when it retires a previous directory. */
extern const char *const ffn_dirswap_owned[];

/* The directory the swap operates on for `dir`: without trailing slashes,
 * and when `dir` is a symbolic link, the real path of its target.
 * malloc'd.  A link to nothing is an error naming it. */
ffn_status ffn_dirswap_target(const char *dir, char **out);

/* Is `dir` an ffn model directory (config.json and model.safetensors)? */
int ffn_dirswap_is_model_dir(const char *dir);

/* Make sure `dir` can be replaced: it is absent, an empty directory or an
 * ffn model directory (never a user's unrelated directory or file); its
 * parent is a directory.  Also finishes an interrupted fallback swap (DIR
 * absent, DIR.old whole: put back; a DIR.old beside a whole DIR is left to
 * the fallback path of ffn_dirswap_commit) and removes what killed swaps
 * left beside DIR: DIR.tmp-XXXXXX (mkdtemp's six characters) that is a
 * real directory holding only regular files of ffn's names or their
 * atomic-write temporaries (NAME.tmp-XXXXXX, NAME.tmp.XXXXXX), or a whole model directory
 * (a previous DIR whose retirement was cut short: its other files are
 * moved into DIR); one of the pattern that holds anything else is left.  `note` (may be NULL) gets one line for
 * each directory of the pattern: removed, or left and why.  Call it
 * holding ffn_dirlock_take(dir): the lock is the proof that the writer
 * that made them is gone. */
ffn_status ffn_dirswap_prepare(const char *dir, void (*note)(const char *message, void *user),
                               void *user);

/* Create a fresh, empty, unpredictably named directory beside `dir` to
 * write the new contents into; *tmp_path gets its path (malloc'd). */
ffn_status ffn_dirswap_begin(const char *dir, char **tmp_path);

/* fsync every file in tmp and tmp itself, then swap it in as described
 * above.  On failure DIR is untouched and tmp is removed. */
ffn_status ffn_dirswap_commit(const char *dir, const char *tmp);

/* Give up a directory made by ffn_dirswap_begin: remove the regular files
 * in it (never following a link) and the directory. */
void ffn_dirswap_abort(const char *tmp);

/* Remove an ffn model or run directory: the files ffn writes (never
 * following a link); anything else stays, and so does the directory then.
 * A directory that is not an ffn one is refused; an absent one is fine. */
ffn_status ffn_dirswap_remove(const char *dir);

/* The directory to read for `dir`: its target when it is an ffn model
 * directory, else DIR.old when DIR is absent and DIR.old is one (an
 * interrupted fallback swap).  malloc'd. */
ffn_status ffn_dirswap_resolve(const char *dir, char **out);

/* An exclusive lock on `dir`: flock on ".NAME.lock" in its parent (the
 * lock file holds the holder's pid), held until ffn_dirlock_release.  When
 * another process holds it, fails at once with FFN_ERR_IO naming that pid. */
typedef struct ffn_dirlock {
    int fd;     /* -1 when not held */
    char *path; /* the lock file */
} ffn_dirlock;

ffn_status ffn_dirlock_take(const char *dir, ffn_dirlock *lock);
/* Remove the lock file and release the lock; a lock not held is a no-op. */
void ffn_dirlock_release(ffn_dirlock *lock);

#endif /* FFN_DIRSWAP_H */
