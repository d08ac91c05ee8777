#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A plain mutex. Critical sections in the engine are short and never do I/O
/// except where documented. Visible to the package's other modules (its
/// test support uses it too), not to users.
package final class Lock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

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
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let cond: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        cond = .allocate(capacity: 1)
        cond.initialize(to: pthread_cond_t())
        pthread_cond_init(cond, nil)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` with the mutex held.
    @inline(__always) func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Releases the mutex until signalled, then holds it again; the
    /// caller holds it.
    func wait() { pthread_cond_wait(cond, mutex) }
    /// Wakes one waiter.
    func signal() { pthread_cond_signal(cond) }
    /// Wakes every waiter.
    func broadcast() { pthread_cond_broadcast(cond) }
}

/// The writer gate: one write transaction at a time; others block until it
/// ends.
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
