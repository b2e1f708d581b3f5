#include "common/file.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

lmq_code lmq_blob_open(const char *path, lmq_blob *out, lmq_err *err)
{
    memset(out, 0, sizeof *out);
    /* O_NONBLOCK: opening a FIFO with no writer returns at once (and is then refused) instead of
     * waiting; mmap ignores the flag, so a regular file needs no fcntl to clear it. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return lmq_fail(err, LMQ_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return lmq_fail(err, LMQ_E_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        out->data = calloc(1, 1);
        return out->data ? LMQ_OK : lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return lmq_fail(err, LMQ_E_IO, "%s: cannot map: %s", path, strerror(errno));
    out->data = p;
    out->size = (size_t)st.st_size;
    out->mapped = 1;
    return LMQ_OK;
}

void lmq_map_drop(const void *p, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (uintptr_t)p & ~(page - 1), hi = ((uintptr_t)p + n + page - 1) & ~(page - 1);
    if (n) /* rounding out stays inside the mapping, which is whole pages */
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void lmq_blob_close(lmq_blob *b)
{
    if (b->mapped)
        munmap((void *)b->data, b->size);
    else
        free((void *)b->data);
    memset(b, 0, sizeof *b);
}

void lmq_blob_release(const lmq_blob *b, size_t offset, size_t size)
{
    if (b->mapped && offset < b->size)
        lmq_map_drop(b->data + offset, size < b->size - offset ? size : b->size - offset);
}

/* ---- outputs ---------------------------------------------------------------------------- */

/* The same file as st, or, for a directory, the same file as one of its entries. */
static int same_file(const struct stat *out, const char *input)
{
    struct stat st;
    if (stat(input, &st) != 0)
        return 0;
    if (st.st_dev == out->st_dev && st.st_ino == out->st_ino)
        return 1;
    if (!S_ISDIR(st.st_mode))
        return 0;
    DIR *d = opendir(input);
    if (!d)
        return 0;
    int same = 0;
    for (struct dirent *e; !same && (e = readdir(d));)
        same = fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_dev == out->st_dev && st.st_ino == out->st_ino;
    closedir(d);
    return same;
}

lmq_code lmq_output_check(const char *out, const char *const *inputs, int n_inputs, lmq_err *err)
{
    struct stat st;
    if (lstat(out, &st) != 0)
        return LMQ_OK; /* nothing there yet (or unreachable: creating the temporary file says why) */
    if (S_ISLNK(st.st_mode))
        return lmq_fail(err, LMQ_E_ARG, "%s: output is a symbolic link: refusing to replace it", out);
    if (!S_ISREG(st.st_mode))
        return lmq_fail(err, LMQ_E_ARG, "%s: output exists and is not a regular file: refusing to replace it", out);
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && same_file(&st, inputs[i]))
            return lmq_fail(err, LMQ_E_ARG, "%s: output is the same file as the input %s: refusing to replace it",
                            out, inputs[i]);
    return LMQ_OK;
}

/* Temporary files a signal must remove: preallocated, since the handler may not allocate, and
 * filled before `used` is set, so the handler never reads half a path. */
#define TMP_SLOTS 16
static struct {
    volatile sig_atomic_t used;
    char path[PATH_MAX];
} tmp_slots[TMP_SLOTS];

static const int cleanup_signals[] = { SIGTERM, SIGHUP, SIGINT, SIGPIPE };

static void on_signal(int sig)
{
    for (int i = 0; i < TMP_SLOTS; i++)
        if (tmp_slots[i].used == 2)
            unlink(tmp_slots[i].path);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_handlers(void)
{
    for (size_t i = 0; i < sizeof cleanup_signals / sizeof cleanup_signals[0]; i++) {
        struct sigaction old, sa = { .sa_handler = on_signal };
        sigemptyset(&sa.sa_mask);
        /* A signal the caller ignores (nohup, SIGPIPE) stays ignored, one it handles stays its own. */
        if (sigaction(cleanup_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
            sigaction(cleanup_signals[i], &sa, NULL);
    }
}

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

/* Reserves a slot (used = 1: not yet a file); returns its index + 1, or 0 when none is free. */
static int slot_reserve(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_handlers);
    int k = 0;
    pthread_mutex_lock(&slots_lock);
    for (int i = 0; i < TMP_SLOTS && !k; i++)
        if (!tmp_slots[i].used) {
            tmp_slots[i].used = 1;
            k = i + 1;
        }
    pthread_mutex_unlock(&slots_lock);
    return k;
}

/* mkstemp with the name in slot k (used = 2) before any signal can see the file on disk. */
static int slot_mkstemp(int k, char *tmp)
{
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof cleanup_signals / sizeof cleanup_signals[0]; i++)
        sigaddset(&block, cleanup_signals[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int fd = mkstemp(tmp);
    if (fd >= 0) {
        strcpy(tmp_slots[k - 1].path, tmp);
        tmp_slots[k - 1].used = 2;
    }
    const int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return fd;
}

static lmq_stale_hook stale_hook;
static void *stale_user;

void lmq_atomic_on_stale(lmq_stale_hook hook, void *user)
{
    stale_hook = hook;
    stale_user = user;
}

/* The bytes of an output's file name its temporary file starts with: all of it, or as many as
 * leave room for the longest suffix (".tmp." + a pid of up to 10 digits + ".XXXXXX") within
 * NAME_MAX, so that any name the filesystem accepts can be written. */
#define TMP_SUFFIX_MAX 22
static size_t tmp_prefix_len(const char *base)
{
    const size_t n = strlen(base);
    return n < NAME_MAX - TMP_SUFFIX_MAX ? n : NAME_MAX - TMP_SUFFIX_MAX;
}

/* Removes "<name>.tmp.<pid>.XXXXXX" files (name: tmp_prefix_len's) whose creator no longer runs;
 * returns how many. */
static int remove_stale(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[PATH_MAX];
    if (slash && (size_t)(slash - path) >= sizeof dir)
        return 0;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    const size_t n = tmp_prefix_len(base);
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const char *s = e->d_name;
        if (strncmp(s, base, n) != 0 || strncmp(s + n, ".tmp.", 5) != 0)
            continue;
        char *end;
        long pid = strtol(s + n + 5, &end, 10);
        if (end == s + n + 5 || pid <= 0 || *end != '.' || strlen(end + 1) != 6)
            continue;
        if (kill((pid_t)pid, 0) == -1 && errno == ESRCH && unlinkat(dirfd(d), s, 0) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}

lmq_code lmq_atomic_open(lmq_atomic *a, const char *path, lmq_err *err)
{
    memset(a, 0, sizeof *a);
    lmq_code c = lmq_output_check(path, NULL, 0, err);
    if (c)
        return c;
    const int stale = remove_stale(path);
    if (stale && stale_hook)
        stale_hook(stale_user, path, stale);
    char pid[24];
    const int np = snprintf(pid, sizeof pid, ".tmp.%ld.XXXXXX", (long)getpid());
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const size_t n = (size_t)(base - path) + tmp_prefix_len(base);
    a->path = strdup(path);
    a->tmp = malloc(n + (size_t)np + 1);
    if (!a->path || !a->tmp) {
        lmq_atomic_abort(a);
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
    }
    memcpy(a->tmp, path, n);
    memcpy(a->tmp + n, pid, (size_t)np + 1);
    if (n + (size_t)np >= PATH_MAX || !(a->slot = slot_reserve())) {
        lmq_atomic_abort(a);
        return lmq_fail(err, LMQ_E_ARG, "%s: path too long, or too many outputs open at once", path);
    }
    int fd = slot_mkstemp(a->slot, a->tmp);
    if (fd < 0) {
        c = lmq_fail(err, LMQ_E_IO, "%s: cannot create temporary file: %s", path, strerror(errno));
        free(a->tmp);
        a->tmp = NULL;
        lmq_atomic_abort(a);
        return c;
    }
    fchmod(fd, 0644);
    a->fp = fdopen(fd, "w+b");
    if (!a->fp) {
        close(fd);
        lmq_atomic_abort(a);
        return lmq_fail(err, LMQ_E_IO, "%s: cannot open temporary file", path);
    }
    return LMQ_OK;
}

lmq_code lmq_atomic_commit(lmq_atomic *a, lmq_err *err)
{
    int e = 0; /* the first failure's errno: fclose after a failed fflush may set another */
    if (fflush(a->fp) != 0 || fsync(fileno(a->fp)) != 0)
        e = errno;
    else if (ferror(a->fp))
        e = EIO; /* an earlier buffered write failed and its errno is gone */
    if (fclose(a->fp) != 0 && !e)
        e = errno;
    a->fp = NULL;
    if (e || rename(a->tmp, a->path) != 0) {
        lmq_code c = lmq_fail(err, LMQ_E_IO, "%s: cannot write: %s", a->path, strerror(e ? e : errno));
        lmq_atomic_abort(a);
        return c;
    }
    free(a->tmp);
    a->tmp = NULL;
    lmq_atomic_abort(a);
    return LMQ_OK;
}

lmq_code lmq_atomic_write(lmq_atomic *a, const void *p, size_t n, lmq_err *err)
{
    if (n && fwrite(p, 1, n, a->fp) != n)
        return lmq_fail(err, LMQ_E_IO, "%s: write failed: %s", a->path, strerror(errno));
    return LMQ_OK;
}

void lmq_atomic_abort(lmq_atomic *a)
{
    if (a->fp)
        fclose(a->fp);
    if (a->tmp)
        unlink(a->tmp);
    if (a->slot)
        tmp_slots[a->slot - 1].used = 0;
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
}
