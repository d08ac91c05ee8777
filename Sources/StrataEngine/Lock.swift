#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - The locks of a store, outermost first
//
// A thread that holds one of these takes only locks below it, never one
// above it; the file locks (1, 2, 4, 5) are taken without waiting, or with
// a deadline (`busyTimeout`), so no order of theirs can deadlock for ever.
//
// 1. `flock` on the main file (`Database.open`, released by `close`):
//    shared for every handle in `.shared` locking mode, exclusive in
//    `.exclusive`; the two modes exclude each other. Never waited for.
// 2. The shared index's open lock (`SharedIndex.openLock`, a byte-range
//    lock of the `-shm` file, held by the descriptor): exclusive while the
//    first handle to open rebuilds the index from the log, shared after;
//    tried exclusive at `close` by the last handle, which checkpoints.
// 3. The writer gate (`WriterGate`, one per handle): one write
//    transaction of this handle at a time. `beginWrite`, `checkpoint`,
//    repairs and `close` take it.
// 4. The shared index's writer lock (`SharedIndex.writerLock`, a
//    byte-range lock): one writer among every handle of every process.
//    Taken with the gate held, up to `busyTimeout`; a group of pending
//    commits keeps it until the last is published (`GroupCommit`).
// 5. A reader slot's lock (`SharedIndex.slotLock`): held for the handle's
//    life; other handles only try it, to tell a dead handle's mark.
// 6. `GroupCommit.condition`: the commits waiting for a shared sync.
//    Never held across I/O: the leader releases it to sync.
// 7. The database's state lock (`Database.stateLock`, shared with its
//    `WAL`, `Pager` and `GroupCommit`): the published state, the cache,
//    counters, the poisoned flag. Short sections; held for I/O only where
//    its holder documents it.
// 8. The catalog cache's lock (`CatalogCache.lock`): a leaf.
//
// In the object layer (Strata), a file's opening lock (held while its
// store opens and migrates) and a store's catching-up lock (held while it
// reads other processes' saves) come before every lock above; `Locked`
// values are leaves: their sections only read or set the value.

/// A plain mutex. Critical sections in the engine are short and never do I/O
/// except where documented. Visible to the package's other modules (its
/// test support uses it too), not to users.
package final class Lock: @unchecked Sendable {
    /// The pthread mutex (a ``Condition`` waits with it).
    let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// An unlocked mutex.
    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the mutex held and returns its result; the mutex is
    /// released even when `body` throws.
    @inline(__always) package func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// A mutex and a condition variable on it (pthread's, which
/// ThreadSanitizer understands), for the engine's waits: the writer gate
/// and the commits waiting for a shared sync.
final class Condition: @unchecked Sendable {
    private let mutex = Lock()
    /// The condition variable ``wait()``, ``signal()`` and ``broadcast()``
    /// use; others can share the mutex (``wait(on:)``).
    private let own = ConditionVariable()

    func lock() { pthread_mutex_lock(mutex.mutex) }
    func unlock() { pthread_mutex_unlock(mutex.mutex) }

    /// Runs `body` with the mutex held.
    @inline(__always) func withLock<R>(_ body: () throws -> R) rethrows -> R { try mutex.withLock(body) }

    /// Releases the mutex until signalled, then holds it again; the
    /// caller holds it.
    func wait() { wait(on: own) }

    /// As ``wait()``, on another condition variable of this mutex.
    func wait(on other: ConditionVariable) { pthread_cond_wait(other.cond, mutex.mutex) }
    /// Wakes one waiter.
    func signal() { own.signal() }
    /// Wakes every waiter.
    func broadcast() { own.broadcast() }
}

/// A condition variable waited on with a ``Condition``'s mutex (see
/// ``Condition/wait(on:)``): waiters of one kind wake without the others.
final class ConditionVariable: @unchecked Sendable {
    fileprivate let cond: UnsafeMutablePointer<pthread_cond_t>

    init() {
        cond = .allocate(capacity: 1)
        cond.initialize(to: pthread_cond_t())
        pthread_cond_init(cond, nil)
    }

    deinit {
        pthread_cond_destroy(cond)
        cond.deallocate()
    }

    /// Wakes one waiter; the caller holds the mutex it is waited on with.
    func signal() { pthread_cond_signal(cond) }
    /// Wakes every waiter; the caller holds the mutex.
    func broadcast() { pthread_cond_broadcast(cond) }
}

/// The writer gate: one write transaction at a time; others block until it
/// ends (lock 3 of the order above).
final class WriterGate: @unchecked Sendable {
    private let condition = Condition()
    private var held = false  // guarded by condition
    /// The thread holding the gate, while one does.
    private var owner: pthread_t?  // guarded by condition

    func acquire() {
        condition.withLock {
            while held { condition.wait() }
            held = true
            owner = pthread_self()
        }
    }

    /// True when the calling thread holds the gate (it is inside its own
    /// write transaction).
    var isHeldByCurrentThread: Bool {
        condition.withLock {
            guard held, let owner else { return false }
            return pthread_equal(owner, pthread_self()) != 0
        }
    }

    func release() {
        condition.withLock {
            held = false
            owner = nil
            condition.signal()
        }
    }
}
