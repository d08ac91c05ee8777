import Foundation
import Strata
import StrataEngine

// Applying server changes. Each is one save authored `SyncReplica.author`
// that also moves `sync.meta`'s `position` (and writes the identifier map,
// the links and the kept parts) in its own transaction, through a
// `SaveParticipant`.
//
// `sync.kept`: server sequence number (8 bytes, RowKey) → the parts of
// that change this schema does not know (`SyncChangeSet`: entities and
// attributes a newer schema of the zone declares), applied by `adoptKept`
// once a migration brings them.

extension SyncReplica {
    /// A server change that this store cannot apply: its payload does not
    /// decode, or names what the schema does not hold, or holds a value of
    /// the wrong type. The store is unchanged.
    package struct DamagedChange: Error, CustomStringConvertible {
        package let seq: Int64
        package let reason: String
        package var description: String { "server change \(seq): \(reason)" }
    }

    /// What applying a server change did here.
    package struct Applied: Sendable {
        package var inserted: [PersistentIdentifier] = []
        package var updated: [PersistentIdentifier] = []
        package var deleted: [PersistentIdentifier] = []
        /// Models merged into others by a unique constraint.
        package var merged: [SyncEngine.Merge] = []
        /// This device's saved changes that the zone removed.
        package var lost: [SyncEngine.LostChange] = []
        package var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }
        /// Adds what a later change did.
        package mutating func add(_ later: Applied) {
            inserted += later.inserted
            updated += later.updated
            deleted += later.deleted
            merged += later.merged
            lost += later.lost
        }
        package init() {}
    }

    /// Applies server change `seq` (pushed by `device` as its save `token`)
    /// as one save authored ``author``, and moves the position to `seq` in
    /// the same transaction. This device's own change is an acknowledgment:
    /// its models and values are here already, and only what the zone's
    /// order makes of it (the cascades below) is applied.
    ///
    /// Attributes that local saves not yet pushed changed keep their local
    /// values: those saves come later in the zone's order, so every device
    /// ends with them.
    ///
    /// Deletes cascade in the zone's order, not by what this store holds
    /// now: a to-one whose inverse deletes by `.cascade` is remembered as the
    /// zone last set it (`sync.links`), and a delete takes every model the
    /// zone last put under it, even one a local save not pushed yet moved
    /// away (a delete wins over later changes). A to-one the zone sets to a
    /// model already deleted takes its model too.
    ///
    /// Parts of the change that this schema lacks and another schema of the
    /// zone (``zoneSchemas``) declares are kept in `sync.kept`; parts that no
    /// schema of the zone declares make the change damaged.
    ///
    /// `pushed`: for this device's own change, the change set as the server
    /// took it, which the zone copy applies (the outbox entry may have been
    /// readdressed since the push read it).
    @discardableResult
    package func apply(seq: Int64, device: SyncID, token: Int64, payload: [UInt8], pushed: [UInt8]? = nil) throws
        -> Applied
    {
        let state = try store.read { tx in try Self.readMeta(tx) }
        let own = device == state.device
        let set: SyncChangeSet
        do {
            set = try SyncChangeSet.decode(own ? try outboxEntry(token) ?? payload : payload)
        } catch let error as SyncPayloadError {
            throw DamagedChange(seq: seq, reason: error.description)
        }
        let copy = copyInStep()
        let applied = try apply(seq: seq, set: set, own: own ? token : nil, replay: false, origin: (device, token))
        guard let copy else { return applied }
        var zoneSet = set
        if own, let pushed {
            do {
                zoneSet = try SyncChangeSet.decode(pushed)
            } catch {
                // Left behind, the copy is out of step and made again.
                return applied
            }
        }
        copyFollows(copy, seq: seq, set: zoneSet, origin: (device, token))
        return applied
    }

    /// Applies `set`, server change `seq`; `own` is this device's save
    /// token when the change is its own. A replay applies the kept part of
    /// a change applied before: the position stays, and what is still
    /// unknown stays kept.
    /// `origin`: the device and save token of the change, recorded with the
    /// position (see ``checkPosition(_:)``); nil for a snapshot.
    @discardableResult
    func apply(
        seq: Int64, set: SyncChangeSet, own: Int64?, replay: Bool, origin: (device: SyncID, token: Int64)? = nil
    ) throws -> Applied {
        // A merge needs every local save in the outbox (see
        // `SyncReplica+Merge`); an app that keeps saving meanwhile gets a
        // few tries, then the round fails and the next one tries again.
        for _ in 0..<3 {
            do {
                return try applyOnce(seq: seq, set: set, own: own, replay: replay, origin: origin)
            } catch is OutboxNotPrepared {
                _ = try prepareOutbox()
            }
        }
        return try applyOnce(seq: seq, set: set, own: own, replay: replay, origin: origin)
    }

    private func applyOnce(
        seq: Int64, set: SyncChangeSet, own: Int64?, replay: Bool, origin: (device: SyncID, token: Int64)?
    ) throws -> Applied {
        var application = try ChangeApplication(replica: self, seq: seq, own: own, replay: replay)
        application.origin = origin
        application.deletes = Set(set.changes.filter { $0.kind == .delete }.map(\.id))
        try application.noteUniqueValues(of: set)
        for change in set.changes { try application.take(change) }
        try application.linkAll()
        try application.cascade()
        try application.mergeCollisions()
        let atRisk = try application.modelsAtRisk()
        let gathered = application
        let lost = LostModels()
        try gathered.context.save(
            with: StateWrite { tx in
                try gathered.writeState(tx)
                if !atRisk.isEmpty { lost.models = try gathered.lostModels(of: atRisk, in: tx) }
            })
        var result = gathered.result
        result.lost = lost.models + result.lost
        return result
    }

    /// The lost changes a save found, out of its transaction.
    private final class LostModels {
        var models: [SyncEngine.LostChange] = []
    }

    /// The sync state of an applied change, written by the save that
    /// applies it (a ``SaveParticipant``).
    final class StateWrite: SaveParticipant {
        let write: (WriteTransaction) throws -> Void
        init(_ write: @escaping (WriteTransaction) throws -> Void) { self.write = write }
        func saveWillCommit(_ save: SaveParticipation) throws { try write(save.transaction) }
    }

    /// `change`'s fields that `entity` has, and those it lacks that another
    /// schema of the zone declares for it; a field that no schema of the zone
    /// declares makes the change damaged (unless `checked`: a kept part).
    func split(_ change: SyncChangeSet.Change, _ entity: Schema.Entity, seq: Int64, checked: Bool) throws
        -> (known: [SyncChangeSet.Field], unknown: [SyncChangeSet.Field])
    {
        var known: [SyncChangeSet.Field] = []
        var unknown: [SyncChangeSet.Field] = []
        for field in change.fields {
            if entity.properties.contains(where: { $0.name == field.name }) {
                known.append(field)
            } else if checked
                || zoneSchemas.contains(where: {
                    guard let other = $0.entities[entity.name] else { return false }
                    return other.attributes[field.name] != nil || other.relationships[field.name] != nil
                })
            {
                unknown.append(field)
            } else {
                throw DamagedChange(seq: seq, reason: "\(entity.name).\(field.name) is in no schema of the zone")
            }
        }
        return (known, unknown)
    }
}
