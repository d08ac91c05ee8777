import StrataEngine

/// A value guarded by a mutex, used as `Synchronization.Mutex` is.
///
/// The mutex is a pthread mutex (the engine's `Lock`), which
/// ThreadSanitizer understands. `Mutex` on Linux locks with futexes that
/// ThreadSanitizer does not see, so it reports every access under one as
/// a race (a two-thread counter under `Mutex` is enough), which would
/// hide real races in the concurrent tests.
final class Locked<Value>: @unchecked Sendable {
    private let lock = Lock()
    /// Guarded by `lock`, which also keeps accesses from overlapping: the
    /// runtime's exclusivity check is left out.
    @exclusivity(unchecked) private var value: Value  // guarded by lock

    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value, the mutex held.
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try lock.withLock { try body(&value) }
    }
}
