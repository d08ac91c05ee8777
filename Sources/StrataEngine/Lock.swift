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

/// The writer gate: one write transaction at a time; others block until it
/// ends.
final class WriterGate: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let cond: UnsafeMutablePointer<pthread_cond_t>
    private var held = false
    /// The thread holding the gate, while one does.
    private var owner: pthread_t?

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

    func acquire() {
        pthread_mutex_lock(mutex)
        while held { pthread_cond_wait(cond, mutex) }
        held = true
        owner = pthread_self()
        pthread_mutex_unlock(mutex)
    }

    /// True when the calling thread holds the gate (it is inside its own
    /// write transaction).
    var isHeldByCurrentThread: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard held, let owner else { return false }
        return pthread_equal(owner, pthread_self()) != 0
    }

    func release() {
        pthread_mutex_lock(mutex)
        held = false
        owner = nil
        pthread_cond_signal(cond)
        pthread_mutex_unlock(mutex)
    }
}
