import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Posts `willSave` and `didSave` to `NotificationCenter.default`, as
/// SwiftData does: on the saving thread, whose observers run before the
/// post returns.
///
/// On Linux the posts of this process's contexts first take one gate, a
/// mutex that sleeps: Foundation's `NotificationCenter` guards its table
/// with a `Synchronization.Mutex`, which on Linux spins before it sleeps,
/// and savers on many threads (their group commit wakes them together)
/// spent a third of their CPU in its posts, most of it spinning.
/// `commit-bench --strata-only` with 64 savers on 2 cores (`perf record`,
/// 5,120 saves): the posts went from 31.8% of the CPU samples to 3.2%,
/// and the samples from 3,923 to 3,259; three rounds gave 6,614–10,279
/// saves/s without the gate and 10,223–11,720 with it.
///
/// The gate is held while the observers run, so it must never make a
/// post wait on an observer for good. It is recursive (an observer that
/// saves on its own thread posts at once), and a post waits for it at
/// most ``patience``, then posts without it: an observer that waits for
/// another thread's save (a `DispatchQueue.main.sync` while the main
/// thread saves) delays that save by no more than that. A waiting post
/// sleeps instead of spinning, which is the point.
enum SaveNotifications {
    /// The longest a post waits for the gate.
    static let patience: Duration = .microseconds(500)

    static func post(_ name: Notification.Name, of context: ModelContext, userInfo: [AnyHashable: Any]? = nil) {
        #if os(Linux)
            let held = gate.take(within: patience)
            defer { if held { gate.release() } }
        #endif
        NotificationCenter.default.post(name: name, object: context, userInfo: userInfo)
    }

    #if os(Linux)
        static let gate = Gate()

        /// A recursive pthread mutex taken with a deadline.
        final class Gate: @unchecked Sendable {
            private let mutex: UnsafeMutablePointer<pthread_mutex_t>

            init() {
                mutex = .allocate(capacity: 1)
                mutex.initialize(to: pthread_mutex_t())
                var attributes = pthread_mutexattr_t()
                pthread_mutexattr_init(&attributes)
                pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
                pthread_mutex_init(mutex, &attributes)
                pthread_mutexattr_destroy(&attributes)
            }

            /// Takes the mutex, waiting at most `patience` (measured on the
            /// realtime clock, which `pthread_mutex_timedlock` uses: a clock
            /// step can only shorten or lengthen that one wait); false when
            /// it did not.
            func take(within patience: Duration) -> Bool {
                if pthread_mutex_trylock(mutex) == 0 { return true }
                var deadline = timespec()
                clock_gettime(CLOCK_REALTIME, &deadline)
                deadline.tv_sec += Int(patience.components.seconds)
                deadline.tv_nsec += Int(patience.components.attoseconds / 1_000_000_000)
                if deadline.tv_nsec >= 1_000_000_000 {
                    deadline.tv_sec += 1
                    deadline.tv_nsec -= 1_000_000_000
                }
                return pthread_mutex_timedlock(mutex, &deadline) == 0
            }

            func release() { pthread_mutex_unlock(mutex) }
        }
    #endif
}
