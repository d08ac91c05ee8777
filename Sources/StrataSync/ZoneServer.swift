import Foundation

/// One change of a zone as the server holds it: a device's save.
struct ServerChange: Sendable {
    /// The zone's sequence number: the order every device applies changes in.
    var seq: Int64
    /// The device that pushed it (16 bytes).
    var device: [UInt8]
    /// The pushing device's history token of the save.
    var token: Int64
    /// The encoded ``SyncChangeSet``.
    var payload: [UInt8]
    /// The digest of the pushing device's schema (``SyncSchema/hash``).
    var schema: String = ""
    /// Why a device set the change aside (its payload is not sent then);
    /// nil for a change to apply.
    var setAside: (code: String, reason: String)?
}

/// Where a zone stands.
struct ZoneHead: Sendable, Equatable {
    /// The last change's sequence number.
    var head: Int64
    /// The last change the snapshot stands for (0: never trimmed).
    var trimmed: Int64
}

/// What the server did with a pushed save.
enum PushOutcome: Sendable, Equatable {
    /// Appended as change `seq`, right after the position the device gave.
    case appended(seq: Int64)
    /// The zone moved past the device's position: pull, then push again.
    case behind(head: Int64)
    /// The save was appended before (a retry): as change `seq`.
    case duplicate(seq: Int64)
}

/// The server side of a zone. Every call is one server transaction.
protocol ZoneServer: Sendable {
    /// Checks that the server holds the layout this StrataSync talks to
    /// (``SyncError/Code/serverLayout`` when not); creates nothing.
    func prepare() async throws(SyncError)
    /// Appends `payload` as the zone's next change if the zone's last change
    /// is `expected`; a save pushed before (same device and token) is not
    /// appended again.
    func push(zone: String, device: [UInt8], token: Int64, expected: Int64, schema: String, payload: [UInt8])
        async throws(SyncError) -> PushOutcome
    /// Records the schema described by `description` (``SyncSchema/text``,
    /// digest `hash`) among those that sync with `zone`, unless `accept`,
    /// given the descriptions of the zone's other schemas, throws: then
    /// nothing is recorded and its error is thrown. Returns those
    /// descriptions.
    func register(zone: String, hash: String, description: String, accept: @escaping @Sendable ([String]) throws -> Void)
        async throws(SyncError) -> [String]
    /// The zone's last sequence number (0 for a zone with no change), and
    /// the last one trimmed: changes through it are gone, and the zone's
    /// snapshot at it stands for them.
    func head(zone: String) async throws(SyncError) -> ZoneHead
    /// Part `part` of the zone's snapshot at change `through` (an encoded
    /// ``SyncChangeSet``); nil past the last part, or when the zone holds
    /// no snapshot at `through` any more.
    func snapshotPart(zone: String, through: Int64, part: Int) async throws(SyncError) -> [UInt8]?
    /// Replaces the zone's changes through `through` by a snapshot of the
    /// zone's models at it (`parts`), in one transaction; false when the
    /// zone holds no change `through` or is trimmed there already. The
    /// changes keep their device and token, so that a retried push is still
    /// recognized, and lose their payload.
    func trim(zone: String, through: Int64, parts: [[UInt8]]) async throws(SyncError) -> Bool
    /// The zone's changes after `after`, in order, at most `limit`.
    func pull(zone: String, after: Int64, limit: Int) async throws(SyncError) -> [ServerChange]
    /// Records that change `seq` of the zone cannot be read (`code`, a
    /// ``SyncStatus/SetAsideChange/Reason`` raw value, and `reason`), so
    /// that every device moves past it; false when it was set aside
    /// already. ``SyncError/Code/forbidden`` for a role that may not write
    /// the zone.
    func setAside(zone: String, seq: Int64, code: String, reason: String) async throws(SyncError) -> Bool
    /// Which parts of the external values `values` (each a SHA-256 and its
    /// number of parts) the zone lacks, as (digest, part) pairs.
    /// ``SyncError/Code/forbidden`` for a role that may not write the zone.
    func missingParts(zone: String, values: [(digest: [UInt8], parts: Int)]) async throws(SyncError)
        -> [(digest: [UInt8], part: Int)]
    /// Stores parts of external values in the zone (a part it holds
    /// already stays as it is).
    func putParts(zone: String, parts: [(digest: [UInt8], part: Int, bytes: [UInt8])]) async throws(SyncError)
    /// The parts asked for (digest, part) that the zone holds, in any order.
    func parts(zone: String, _ wanted: [(digest: [UInt8], part: Int)]) async throws(SyncError)
        -> [(digest: [UInt8], part: Int, bytes: [UInt8])]
    /// Calls `listening` once notifications reach this device, then `wake`
    /// for every notification that the zone changed, until
    /// the task is cancelled or the connection breaks (then it throws).
    func listen(zone: String, listening: @escaping @Sendable () -> Void, wake: @escaping @Sendable () -> Void)
        async throws(SyncError)
    /// Closes the connections.
    func close() async
}
