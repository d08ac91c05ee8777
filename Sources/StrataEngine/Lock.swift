import CStrataCRC32C
import Synchronization

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
// 6. `GroupCommit.condition`: the queue of commits waiting for a shared
//    sync (they sleep on its `EventCount`s without it). Never held across
//    I/O: the leader releases it to sync. Off Linux, an `EventCount`'s
//    own mutex is a leaf taken under it.
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
/// ThreadSanitizer understands): the group commit's queue and its idle
/// waiters, and off Linux the writer gate and ``EventCount``.
final class Condition: @unchecked Sendable {
    private let mutex = Lock()
    private let cond: UnsafeMutablePointer<pthread_cond_t>

    init() {
        cond = .allocate(capacity: 1)
        cond.initialize(to: pthread_cond_t())
        pthread_cond_init(cond, nil)
    }

    deinit {
        pthread_cond_destroy(cond)
        cond.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex.mutex) }
    func unlock() { pthread_mutex_unlock(mutex.mutex) }

    /// Runs `body` with the mutex held.
    @inline(__always) func withLock<R>(_ body: () throws -> R) rethrows -> R { try mutex.withLock(body) }

    /// Releases the mutex until signalled, then holds it again; the
    /// caller holds it.
    func wait() { pthread_cond_wait(cond, mutex.mutex) }
    /// Wakes one waiter; the caller holds the mutex.
    func signal() { pthread_cond_signal(cond) }
    /// Wakes every waiter; the caller holds the mutex.
    func broadcast() { pthread_cond_broadcast(cond) }
}

/// A count of events that threads wait for without holding a lock: a
/// waiter reads ``key`` while it holds the lock that guards what it waits
/// for, releases that lock, then calls ``wait(unless:)``. `notify(all:
/// true)` run after the key was read makes that wait return (at once if it
/// ran already). `notify(all: false)` wakes one waiter already asleep, and
/// every waiter not yet asleep returns at once; the others asleep stay so
/// until a later notification. A woken thread does not queue for a mutex
/// before it can look at what changed. Spurious returns happen: the
/// waiter checks its condition again.
///
/// On Linux the count is a futex word, and a notification makes the wake
/// call only when a thread may be asleep: a lone committer's sync, which
/// nobody waits for, costs no system call for it. Elsewhere a mutex and a
/// condition variable of its own.
final class EventCount: @unchecked Sendable {
    #if os(Linux)
        /// The count times two; bit 0 is set by a thread about to sleep on
        /// the word, and cleared by the notification that wakes every
        /// sleeper.
        private let word: UnsafeMutablePointer<Atomic<UInt32>>
        /// Wake calls made (for tests).
        private let wakeCalls = Atomic<Int>(0)

        init() {
            word = .allocate(capacity: 1)
            word.initialize(to: Atomic(0))
        }

        deinit {
            word.deinitialize(count: 1)
            word.deallocate()
        }

        /// The count now.
        var key: UInt32 { word.pointee.load(ordering: .acquiring) & ~1 }

        /// How many notifications made a wake call (for tests).
        var wakes: Int { wakeCalls.load(ordering: .relaxed) }

        /// True when a thread marked the word before sleeping and no
        /// notification to every waiter came since (for tests).
        var mayHaveSleepers: Bool { word.pointee.load(ordering: .acquiring) & 1 != 0 }

        /// Sleeps while the count is still `key`.
        func wait(unless key: UInt32) {
            while true {
                let now = word.pointee.load(ordering: .acquiring)
                if now & ~1 != key { return }
                // Marked before sleeping, so that the next notification
                // makes its wake call; a notification in between changes
                // the word, and the exchange (or the sleep) fails.
                if now & 1 == 0,
                    !word.pointee.compareExchange(expected: now, desired: now | 1, ordering: .acquiringAndReleasing).exchanged
                {
                    continue
                }
                _ = strata_futex_wait(UnsafeRawPointer(word), key | 1)
            }
        }

        /// Advances the count and wakes every waiter, or one. Waking every
        /// one clears the mark; waking one keeps it, for the others that
        /// may still sleep.
        func notify(all: Bool) {
            var old = word.pointee.load(ordering: .relaxed)
            while true {
                let new = all ? (old &+ 2) & ~1 : old &+ 2
                let (exchanged, found) = word.pointee.compareExchange(
                    expected: old, desired: new, ordering: .acquiringAndReleasing)
                if exchanged { break }
                old = found
            }
            guard old & 1 != 0 else { return }
            wakeCalls.wrappingAdd(1, ordering: .relaxed)
            strata_futex_wake(UnsafeRawPointer(word), all ? Int32.max : 1)
        }
    #else
        private let condition = Condition()
        private var count: UInt32 = 0  // guarded by condition

        /// The count now.
        var key: UInt32 { condition.withLock { count } }

        /// Sleeps while the count is still `key`.
        func wait(unless key: UInt32) {
            condition.withLock { while count == key { condition.wait() } }
        }

        /// Advances the count and wakes every waiter, or one.
        func notify(all: Bool) {
            condition.withLock {
                count &+= 1
                if all { condition.broadcast() } else { condition.signal() }
            }
        }
    #endif
}

/// The writer gate: one write transaction at a time; others block until it
/// ends (lock 3 of the order above).
///
/// On Linux a word and a futex: taking a free gate is one atomic exchange,
/// and a release wakes one sleeper only when one may be there (state 2),
/// which then takes the gate without a second lock (pthread's mutex and
/// condition variable took up to five futex calls per hand-over, with the
/// woken thread queueing for the mutex again). A thread that is running
/// may take a released gate before the woken one does.
final class WriterGate: @unchecked Sendable {
    #if os(Linux)
        /// 0 free, 1 held, 2 held and a thread may be sleeping on it.
        private let state: UnsafeMutablePointer<Atomic<UInt32>>
        /// The holding thread's `pthread_t`, 0 when free; written only by
        /// the holder.
        private let holder: UnsafeMutablePointer<Atomic<UInt>>

        init() {
            state = .allocate(capacity: 1)
            state.initialize(to: Atomic(0))
            holder = .allocate(capacity: 1)
            holder.initialize(to: Atomic(0))
        }

        deinit {
            state.deinitialize(count: 1)
            state.deallocate()
            holder.deinitialize(count: 1)
            holder.deallocate()
        }

        func acquire() {
            if !state.pointee.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged {
                // Marked 2 before sleeping, so the release wakes someone;
                // a thread that finds it free this way keeps the 2.
                while state.pointee.exchange(2, ordering: .acquiring) != 0 {
                    _ = strata_futex_wait(UnsafeRawPointer(state), 2)
                }
            }
            holder.pointee.store(UInt(pthread_self()), ordering: .relaxed)
        }

        /// True when the calling thread holds the gate (it is inside its own
        /// write transaction).
        var isHeldByCurrentThread: Bool {
            holder.pointee.load(ordering: .relaxed) == UInt(pthread_self())
        }

        func release() {
            holder.pointee.store(0, ordering: .relaxed)
            if state.pointee.exchange(0, ordering: .releasing) == 2 {
                strata_futex_wake(UnsafeRawPointer(state), 1)
            }
        }
    #else
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
    #endif
}

/// Runs `body` on a new detached thread; false, with nothing run, when the
/// system refuses to make one.
func detachThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
    let context = Unmanaged.passRetained(Body(body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    #if canImport(Glibc)
        var thread = pthread_t()
        let start: @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? = { context in
            Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }
    #else
        var thread: pthread_t?
        let start: @convention(c) (UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? = { context in
            Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }
    #endif
    guard pthread_create(&thread, &attributes, start, context) == 0 else {
        Unmanaged<Body>.fromOpaque(context).release()
        return false
    }
    return true
}
