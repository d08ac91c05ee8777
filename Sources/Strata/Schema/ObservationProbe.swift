import Observation
import Synchronization

/// Tells a model's getter whether an Observation tracking may be recording
/// reads on this thread, so that a model nobody observes never makes an
/// `ObservationRegistrar`.
///
/// A getter must report its read to the model's registrar when it runs
/// inside `withObservationTracking` (or SwiftUI's equivalent): that is how
/// the tracking learns what to watch. Outside one, the report does
/// nothing, yet making a registrar for it (two allocations and a lock, and
/// as much again to destroy) cost a fetch that reads one property of each
/// of its models about a fifth of its time. Observation does not say
/// whether a tracking is active, so the probe asks indirectly: it reports
/// a read of its own sentinel key path to a registrar of its own. A
/// tracking adds that key path to its set of reads, hashing it, and the
/// key path's subscript argument counts its own hashing. A count that
/// moved during the call means a tracking is active (on this thread, or —
/// harmlessly, it only costs a registrar — on another at that moment).
///
/// This relies on how Observation records reads, so ``isReliable`` checks
/// once, with a real tracking, that the count moves; if it ever does not,
/// every getter makes its registrar as before. The tracking the sentinel
/// joins watches a key path nothing ever changes: it costs one entry in
/// the probe's registrar until the tracking ends.
@usableFromInline enum _ObservationProbe {
    /// A subscript argument that counts how often it is hashed.
    struct Argument: Hashable, Sendable {
        static func == (a: Argument, b: Argument) -> Bool { true }
        func hash(into hasher: inout Hasher) {
            _ObservationProbe.hashes.add(1, ordering: .relaxed)
            hasher.combine(0)
        }
    }

    final class Sentinel: Observable, Sendable {
        subscript(probe argument: Argument) -> Int { 0 }
    }

    private static let hashes = Atomic<Int>(0)
    private static let sentinel = Sentinel()
    // A key path is immutable once made.
    nonisolated(unsafe) private static let keyPath: KeyPath<Sentinel, Int> = \Sentinel.[probe: Argument()]
    private static let registrar = ObservationRegistrar()

    /// Whether a read reported now may be recorded by a tracking.
    @usableFromInline static func trackingMayBeActive() -> Bool {
        guard isReliable else { return true }
        return readIsRecorded()
    }

    private static func readIsRecorded() -> Bool {
        let before = hashes.load(ordering: .relaxed)
        registrar.access(sentinel, keyPath: keyPath)
        return hashes.load(ordering: .relaxed) != before
    }

    /// True when a tracking is seen: checked once, inside a real tracking.
    static let isReliable: Bool = {
        let seen = Locked(false)
        withObservationTracking {
            seen.withLock { $0 = readIsRecorded() }
        } onChange: {
        }
        return seen.withLock { $0 }
    }()
}
