/* Output files that a failure cannot damage: the bytes go to a temporary
 * file in the target's folder, which is flushed, synced and renamed over the
 * target only when complete. A target that is the same file as an input is
 * refused before anything is created. docs/reliability.md. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct llmk_outfile {
    FILE *f;
    char *target;    /* where the bytes end up (links resolved) */
    char *tmp;       /* the temporary file; NULL when writing straight to a device */
    const char *shown; /* the path as the caller named it, for messages */
    char *shown_copy;
};

int llmk_path_same_file(const char *a, const char *b, bool *same) {
    llmk_error_clear();
    if (!a || !b || !same) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_path_same_file: NULL argument");
    struct stat sa, sb;
    *same = false;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return LLMK_OK; /* one does not exist */
    *same = sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return LLMK_OK;
}

int llmk_output_check(const char *path, const char *const *inputs, size_t n_inputs) {
    llmk_error_clear();
    if (!path || !*path) return llmk_fail(LLMK_INVALID_ARGUMENT, "output path is empty");
    for (size_t i = 0; i < n_inputs; i++) {
        bool same = false;
        if (!inputs[i]) continue;
        llmk_path_same_file(path, inputs[i], &same);
        if (same)
            return llmk_fail(LLMK_OUTPUT_IS_INPUT, "output %s is the same file as the input %s; "
                             "write to another path", path, inputs[i]);
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return llmk_fail(LLMK_IO_ERROR, "output %s is a directory", path);
    return LLMK_OK;
}

/* The file a path finally names: symlinks are followed so that the rename
 * replaces the file the link points at, not the link. A path that does not
 * exist yet (or a dangling link) is used as given. */
static char *resolve_target(const char *path) {
    char *real = realpath(path, NULL);
    return real ? real : strdup(path);
}

/* "<dir>/.<base>.llmk-<pid>-<n>-<t>": same folder, so the rename cannot
 * cross file systems, hidden, and named after llmk so a leftover is clear. */
static char *temp_name(const char *target, unsigned attempt) {
    static atomic_uint counter;
    char *d = strdup(target), *b = strdup(target);
    char *out = NULL;
    if (d && b) {
        const char *dir = dirname(d), *base = basename(b);
        size_t n = strlen(dir) + strlen(base) + 64;
        out = malloc(n);
        if (out)
            snprintf(out, n, "%s/.%s.llmk-%ld-%u-%lx", dir, base, (long)getpid(),
                     atomic_fetch_add(&counter, 1) + attempt, (unsigned long)time(NULL));
    }
    free(d);
    free(b);
    return out;
}

static void outfile_free(llmk_outfile *o) {
    if (!o) return;
    free(o->target);
    free(o->tmp);
    free(o->shown_copy);
    free(o);
}

/* Character devices and FIFOs (/dev/null, /dev/stdout, a pipe) are written in
 * place: they cannot be renamed over, and removing one would be worse than
 * any partial write. */
static int open_in_place(llmk_outfile *o) {
    o->f = fopen(o->target, "wb");
    if (!o->f) return llmk_fail(LLMK_IO_ERROR, "cannot open %s: %s", o->shown, strerror(errno));
    return LLMK_OK;
}

static int open_temp(llmk_outfile *o, const struct stat *existing) {
    mode_t mode = existing ? (existing->st_mode & 07777) : 0666;
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        free(o->tmp);
        o->tmp = temp_name(o->target, attempt);
        if (!o->tmp) return llmk_fail(LLMK_OUT_OF_MEMORY, "output %s: temporary name", o->shown);
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, existing ? 0600 : 0666);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0)
            return llmk_fail(LLMK_IO_ERROR, "cannot create a temporary file beside %s (%s): %s", o->shown,
                             o->tmp, strerror(errno));
        if (existing) (void)fchmod(fd, mode); /* keep the replaced file's permissions */
        o->f = fdopen(fd, "wb");
        if (!o->f) {
            int e = errno;
            close(fd);
            unlink(o->tmp);
            return llmk_fail(LLMK_IO_ERROR, "output %s: %s", o->shown, strerror(e));
        }
        return LLMK_OK;
    }
    return llmk_fail(LLMK_IO_ERROR, "cannot create a temporary file beside %s: names taken", o->shown);
}

int llmk_outfile_open(const char *path, const char *const *inputs, size_t n_inputs, llmk_outfile **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_outfile_open: out is NULL");
    *out = NULL;
    int st = llmk_output_check(path, inputs, n_inputs);
    if (st != LLMK_OK) return st;
    llmk_outfile *o = calloc(1, sizeof *o);
    if (!o || !(o->target = resolve_target(path)) || !(o->shown_copy = strdup(path))) {
        outfile_free(o);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "output %s", path);
    }
    o->shown = o->shown_copy;
    struct stat sb;
    bool exists = stat(o->target, &sb) == 0;
    if (exists && !S_ISREG(sb.st_mode) && !S_ISCHR(sb.st_mode) && !S_ISFIFO(sb.st_mode)) {
        outfile_free(o);
        return llmk_fail(LLMK_IO_ERROR, "output %s is not a regular file, a device or a pipe", path);
    }
    st = exists && !S_ISREG(sb.st_mode) ? open_in_place(o) : open_temp(o, exists ? &sb : NULL);
    if (st != LLMK_OK) {
        outfile_free(o);
        return st;
    }
    *out = o;
    return LLMK_OK;
}

FILE *llmk_outfile_stream(llmk_outfile *o) { return o ? o->f : NULL; }

const char *llmk_outfile_temp_path(const llmk_outfile *o) { return o ? o->tmp : NULL; }

void llmk_outfile_discard(llmk_outfile *o) {
    if (!o) return;
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp); /* only ever the file this writer created */
    outfile_free(o);
}

int llmk_outfile_commit(llmk_outfile *o) {
    llmk_error_clear();
    if (!o) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_outfile_commit: NULL");
    errno = 0; /* ferror() sets none: an earlier failed write reports as "write error" */
    int bad = ferror(o->f) || fflush(o->f) != 0;
    int e = errno;
    if (!bad && o->tmp && fsync(fileno(o->f)) != 0) bad = 1, e = errno;
    if (fclose(o->f) != 0 && !bad) bad = 1, e = errno;
    o->f = NULL;
    if (!bad && o->tmp && rename(o->tmp, o->target) != 0) bad = 1, e = errno;
    if (bad) {
        int st = llmk_fail(LLMK_IO_ERROR, "writing %s: %s%s", o->shown, e ? strerror(e) : "write error",
                           o->tmp ? " (the target is unchanged)" : "");
        llmk_outfile_discard(o);
        return st;
    }
    outfile_free(o);
    return LLMK_OK;
}
