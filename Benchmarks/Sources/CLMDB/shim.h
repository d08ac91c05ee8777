// LMDB's C API from Debian's liblmdb-dev, for engine-bench's third engine.
#include <lmdb.h>
