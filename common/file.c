#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

lmq_code lmq_blob_open(const char *path, lmq_blob *out, lmq_err *err)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY);
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

lmq_code lmq_atomic_open(lmq_atomic *a, const char *path, lmq_err *err)
{
    memset(a, 0, sizeof *a);
    size_t n = strlen(path);
    a->path = strdup(path);
    a->tmp = malloc(n + 12);
    if (!a->path || !a->tmp) {
        lmq_atomic_abort(a);
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", path);
    }
    memcpy(a->tmp, path, n);
    memcpy(a->tmp + n, ".tmp.XXXXXX", 12);
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        lmq_code c = lmq_fail(err, LMQ_E_IO, "%s: cannot create temporary file: %s", path, strerror(errno));
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
    int ok = fflush(a->fp) == 0 && fsync(fileno(a->fp)) == 0;
    ok = (fclose(a->fp) == 0) && ok;
    a->fp = NULL;
    if (!ok || rename(a->tmp, a->path) != 0) {
        lmq_code c = lmq_fail(err, LMQ_E_IO, "%s: cannot write: %s", a->path, strerror(errno));
        lmq_atomic_abort(a);
        return c;
    }
    free(a->tmp);
    a->tmp = NULL;
    lmq_atomic_abort(a);
    return LMQ_OK;
}

void lmq_atomic_abort(lmq_atomic *a)
{
    if (a->fp)
        fclose(a->fp);
    if (a->tmp)
        unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
}
