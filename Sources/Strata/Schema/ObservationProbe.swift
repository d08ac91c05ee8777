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

    /// The probe's parts, made once: one lazy global to check per call
    /// instead of five, and the registrar in a box (a registrar is a
    /// resilient value, which a `static let` handed out as a copy and then
    /// destroyed). A getter with no registrar: 208 → 169 instructions.
    /// Unchecked: every field is a constant once made (the key path is
    /// immutable, the registrar locks its own state).
    private final class Parts: @unchecked Sendable {
        let sentinel: Sentinel
        let keyPath: KeyPath<Sentinel, Int>
        let box: _RegistrarBox
        /// True when a tracking is seen: checked once, inside a real
        /// tracking, as the parts are made.
        let isReliable: Bool

        init() {
            let sentinel = Sentinel()
            let keyPath: KeyPath<Sentinel, Int> = \Sentinel.[probe: Argument()]
            let box = _RegistrarBox()
            let seen = Locked(false)
            withObservationTracking {
                seen.withLock { $0 = Self.readIsRecorded(box, sentinel, keyPath) }
            } onChange: {
            }
            self.sentinel = sentinel
            self.keyPath = keyPath
            self.box = box
            isReliable = seen.withLock { $0 }
        }

        /// Reports a read of the sentinel; true when a tracking recorded it.
        func readIsRecorded() -> Bool {
            let before = _ObservationProbe.hashes.load(ordering: .relaxed)
            box.registrar.access(sentinel, keyPath: keyPath)
            return _ObservationProbe.hashes.load(ordering: .relaxed) != before
        }

        /// ``readIsRecorded()`` before the parts are stored.
        static func readIsRecorded(_ box: _RegistrarBox, _ sentinel: Sentinel, _ keyPath: KeyPath<Sentinel, Int>) -> Bool {
            let before = _ObservationProbe.hashes.load(ordering: .relaxed)
            box.registrar.access(sentinel, keyPath: keyPath)
            return _ObservationProbe.hashes.load(ordering: .relaxed) != before
        }
    }

    private static let parts = Parts()

    /// Whether a read reported now may be recorded by a tracking.
    @usableFromInline static func trackingMayBeActive() -> Bool {
        guard parts.isReliable else { return true }
        return parts.readIsRecorded()
    }

    /// True when a tracking is seen: checked once, inside a real tracking.
    static var isReliable: Bool { parts.isReliable }
}
