import Foundation
import Strata
import StrataEngine

// Merges ahead of the zone. A device that gave a model a unique value in
// a save not pushed yet, and then pulls another device's model holding
// that value, merges the pulled model into its own at once (a store holds
// one model per unique value); every other device merges the two only
// when the unpushed save arrives, later in the zone's order. Until then,
// the pulled model's to-many lists that the zone sends in full are, on
// the other devices, that model's alone; here they are changes to the
// merged model: what the zone removes from the pulled model's list leaves
// the merged model, what it adds joins it, and the rest stays.
//
// Merges in the zone's order have the same question later: a device that
// saved a model's to-many list before it learned that the model merged
// into another sends the list of the model it knew. Every device takes
// such a list, addressed to the merged identifier, as changes to the list
// the merged model brought to the survivor, so that the survivor's own
// members stay.
//
// `sync.aheadMerges`: the merged model's identifier (16 bytes) → the
// zone's last to-many lists of it (a `SyncChangeSet` of one change: an
// update for a merge ahead of the zone, an insert for one in the zone's
// order); for a merge ahead of the zone, its other fields as the zone
// last gave them too, so that it can part again (see
// `ChangeApplication.partAheadMerge`). An entry ahead of the zone goes
// once this device's own save that holds the unique value is in the zone
// (its own change applied),
// or once the zone moves the pulled model off the value or deletes it
// first (the two part); an entry in the zone's order stays while its
// survivor does. Both go when the survivor is deleted.

extension SyncReplica {
    static let aheadMergesTree = "sync.aheadMerges"

    /// The zone's last to-many lists of `id`, merged ahead of the zone;
    /// nil when it is not.
    static func aheadMerge(_ id: SyncID, _ tx: ReadTransaction) throws -> [String: SyncChangeSet.Field]? {
        try entryOfMerge(id, tx)?.lists
    }

    /// The entry of `id`: its lists, and whether it merged in the zone's
    /// order.
    private static func entryOfMerge(_ id: SyncID, _ tx: ReadTransaction) throws -> (
        lists: [String: SyncChangeSet.Field], inZone: Bool
    )? {
        try aheadEntry(id, tx).map { entry in (entry.fields.filter { $0.value.wire == SyncChangeSet.toMany }, entry.inZone) }
    }

    /// The entry of `id`: every field it records, and whether it merged in
    /// the zone's order.
    static func aheadEntry(_ id: SyncID, _ tx: ReadTransaction) throws -> (
        fields: [String: SyncChangeSet.Field], inZone: Bool
    )? {
        guard let tree = try tx.treeIfPresent(aheadMergesTree), let bytes = try tx.get(id.bytes, in: tree) else {
            return nil
        }
        let set: SyncChangeSet
        do {
            set = try SyncChangeSet.decode(bytes)
        } catch {
            throw SwiftDataError(.corruptRecord, "\(aheadMergesTree): the entry of \(id): \(error)")
        }
        let fields = Dictionary(
            (set.changes.first?.fields ?? []).map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
        return (fields, set.changes.first?.kind == .insert)
    }

    /// Records the zone's to-many lists `fields` of `id` (merged ahead of
    /// the zone, or in the zone's order when `inZone`), over those
    /// recorded, and for a merge ahead of the zone its other fields too;
    /// an entry keeps its kind.
    static func recordAheadMerge(
        _ id: SyncID, entity: String, _ fields: [SyncChangeSet.Field], inZone: Bool = false, _ tx: WriteTransaction
    ) throws {
        let existing = try aheadEntry(id, tx)
        let kept = existing?.inZone ?? inZone
        var recorded = existing?.fields ?? [:]
        for field in fields where !kept || field.wire == SyncChangeSet.toMany { recorded[field.name] = field }
        let change = SyncChangeSet.Change(
            kind: kept ? .insert : .update, entity: entity, id: id,
            fields: recorded.sorted { $0.key < $1.key }.map(\.value))
        let tree = try tx.treeIfPresent(aheadMergesTree) ?? tx.createTree(aheadMergesTree)
        try tx.put(id.bytes, SyncChangeSet(changes: [change]).encode(), in: tree)
    }

    /// The entries of merges into the model at `row` of `entity`, in the
    /// order of their identifiers.
    private static func merges(into entity: Schema.Entity, row: Int64, _ tx: ReadTransaction) throws -> [(
        id: SyncID, lists: [String: SyncChangeSet.Field], inZone: Bool
    )] {
        try ids(in: aheadMergesTree, at: entity, row: row, tx).compactMap { id in
            try entryOfMerge(id, tx).map { (id, $0.lists, $0.inZone) }
        }
    }

    /// The identifiers keyed in `tree` that point at the model at `row` of
    /// `entity`, in their order.
    private static func ids(in tree: String, at entity: Schema.Entity, row: Int64, _ tx: ReadTransaction) throws
        -> [SyncID]
    {
        guard let tree = try tx.treeIfPresent(tree) else { return [] }
        var keys: [[UInt8]] = []
        try tx.forEach(tree) { key, _ in
            if key.count == 16 { keys.append(key) }
            return true
        }
        return try keys.map(SyncID.init(bytes:)).filter { id in
            guard let (name, other) = try entry(of: id, tx) else { return false }
            return name == entity.name && other == row
        }
    }

    /// Ends the merges ahead of the zone into the model at `row` of
    /// `entity`: the zone holds this device's save now; or every merge into
    /// it when `all` (the model is gone). Returns the identifiers of the
    /// merges ended ahead of the zone.
    @discardableResult
    static func endAheadMerges(into entity: Schema.Entity, row: Int64, all: Bool = false, _ tx: WriteTransaction) throws
        -> [SyncID]
    {
        guard let tree = try tx.treeIfPresent(aheadMergesTree) else { return [] }
        var ended: [SyncID] = []
        for merge in try merges(into: entity, row: row, tx) where all || !merge.inZone {
            try tx.delete(merge.id.bytes, in: tree)
            if !merge.inZone { ended.append(merge.id) }
        }
        return ended
    }

    /// The pulled models merged ahead of the zone into the model at `row`
    /// of `entity`: in the zone's order they are apart from it still.
    static func mergedAheadIDs(into entity: Schema.Entity, row: Int64, _ tx: ReadTransaction) throws -> [SyncID] {
        try merges(into: entity, row: row, tx).filter { !$0.inZone }.map(\.id)
    }

    /// Forgets that `row` of `entity` merged ahead of the zone from some
    /// save on: no pulled model is merged into it ahead of the zone now.
    static func forgetAheadFrom(_ entity: String, row: Int64, _ tx: WriteTransaction) throws {
        if let tree = try tx.treeIfPresent(aheadFromTree) { try tx.delete(rowKey(entity, row), in: tree) }
    }

    /// A pulled model merged ahead of the zone into the model at `row`,
    /// with the zone's last lists of it; nil when there is none.
    static func mergedAhead(into entity: Schema.Entity, row: Int64, _ tx: ReadTransaction) throws -> (
        id: SyncID, lists: [String: SyncChangeSet.Field]
    )? {
        try merges(into: entity, row: row, tx).first { !$0.inZone }.map { ($0.id, $0.lists) }
    }

    /// `sync.aheadFrom`: a row merged ahead of the zone (entity name, 0,
    /// RowKey) → the token of the local save that gave it the values it
    /// merged on (RowKey). Local saves before that one change a model that,
    /// in the zone's order, is still apart: the merge there takes none of
    /// their attributes, so here they mask nothing either.
    static let aheadFromTree = "sync.aheadFrom"

    static func recordAheadFrom(_ entity: String, row: Int64, token: Int64, _ tx: WriteTransaction) throws {
        let tree = try tx.treeIfPresent(aheadFromTree) ?? tx.createTree(aheadFromTree)
        try tx.put(rowKey(entity, row), RowKey.encode(token), in: tree)
    }

    /// The token from which local saves mask `row` of `entity` (nil: all).
    static func aheadFrom(_ entity: String, row: Int64, _ tx: ReadTransaction) throws -> Int64? {
        guard let tree = try tx.treeIfPresent(aheadFromTree), let bytes = try tx.get(rowKey(entity, row), in: tree) else {
            return nil
        }
        return try RowKey.decode(bytes)
    }

    /// For a merge ahead of the zone into (or of) the model at `row`: the
    /// attributes that local saves not pushed yet changed on it from the
    /// first one that gave it values of a unique constraint (nil: every
    /// attribute, that save inserted it), and that save's token; nil when
    /// no such save waits.
    static func aheadMask(_ entity: Schema.Entity, row: Int64, _ tx: ReadTransaction) throws -> (
        names: Set<String>?, from: Int64
    )? {
        let unique = uniqueNames(entity)
        var from: Int64?
        var names: Set<String>? = []
        for (token, changed) in try unpushedSaves(entity, row: row, tx) {
            if from == nil {
                guard changed.map({ !unique.isDisjoint(with: $0) }) ?? true else { continue }
                from = token
            }
            if let changed, let current = names { names = current.union(changed) } else { names = nil }
        }
        return from.map { (names, $0) }
    }

    /// The local saves not pushed yet that changed the model at `row` of
    /// `entity`, in order: each one's token and the attributes it changed
    /// (a compound constraint's as one; nil: it inserted the model).
    private static func unpushedSaves(_ entity: Schema.Entity, row: Int64, _ tx: ReadTransaction) throws -> [(
        token: Int64, names: Set<String>?
    )] {
        let pushed = try number("pushed", tx)
        let last = try HistoryLog.lastToken(tx)
        guard last > pushed else { return [] }
        var saves: [(token: Int64, names: Set<String>?)] = []
        for raw in try HistoryLog.readRaw(tx, after: pushed, through: last) where raw.author != author {
            for change in raw.changes where change.entity == entity.name {
                guard try survivingRow(change.entity, change.row, tx) == row else { continue }
                saves.append(
                    (raw.token, change.kind == .update ? wholeConstraints(Set(change.attributes), entity) : nil))
            }
        }
        return saves
    }

    /// Each property of the model at `row` of `entity` that local saves
    /// not pushed yet changed, from the one with token `from` on (nil:
    /// all), with the token of the last of them: of two models that merge,
    /// the later save of a property comes later in the zone's order too.
    static func unpushedTokens(_ entity: Schema.Entity, row: Int64, from: Int64? = nil, _ tx: ReadTransaction) throws
        -> [String: Int64]
    {
        var tokens: [String: Int64] = [:]
        for (token, names) in try unpushedSaves(entity, row: row, tx) where token >= from ?? token {
            for name in names ?? Set(entity.properties.map(\.name)) { tokens[name] = token }
        }
        return tokens
    }
}

// Local models merged ahead of the zone into a pulled one. A device that
// gave a model a unique value in a save not pushed yet, and then pulls a
// change that gives another model that value, keeps the pulled model and
// merges its own into it at once when its own save is the later one (it
// comes later in the zone's order). Until that save is in the zone, the
// zone may delete the local model first: in the zone's order the two never
// merge then, and the pulled model keeps its own values and members.
//
// `sync.aheadLosers`: the local model's identifier (16 bytes) → the token
// of the save that gave it the values (RowKey), its row before the merge
// (RowKey), and a `SyncChangeSet` of one update: the pulled model's
// attributes that the local model's values went over, and the members
// (to-many fields) the local model brought. An entry counts while its save
// is not pushed.

extension SyncReplica {
    static let aheadLosersTree = "sync.aheadLosers"

    /// A local model merged ahead of the zone into a pulled one, as
    /// recorded.
    struct AheadLoser {
        var from: Int64
        var row: Int64
        /// The pulled model's attributes to give back, and the members the
        /// local model brought (to-many fields).
        var fields: [SyncChangeSet.Field]
    }

    static func recordAheadLoser(_ id: SyncID, entity: String, _ loser: AheadLoser, _ tx: WriteTransaction) throws {
        let tree = try tx.treeIfPresent(aheadLosersTree) ?? tx.createTree(aheadLosersTree)
        let set = SyncChangeSet(changes: [.init(kind: .update, entity: entity, id: id, fields: loser.fields)])
        try tx.put(id.bytes, RowKey.encode(loser.from) + RowKey.encode(loser.row) + set.encode(), in: tree)
    }

    /// The entry of `id` while the save that merged it is not pushed; nil
    /// when there is none.
    static func aheadLoser(_ id: SyncID, _ tx: ReadTransaction) throws -> AheadLoser? {
        guard let tree = try tx.treeIfPresent(aheadLosersTree), let bytes = try tx.get(id.bytes, in: tree) else {
            return nil
        }
        guard bytes.count > 16 else { throw SwiftDataError(.corruptRecord, "\(aheadLosersTree): the entry of \(id)") }
        let from = try RowKey.decode(Array(bytes[0..<8]))
        guard from > (try number("pushed", tx)) else { return nil }
        do {
            let set = try SyncChangeSet.decode(Array(bytes[16...]))
            return AheadLoser(from: from, row: try RowKey.decode(Array(bytes[8..<16])), fields: set.changes.first?.fields ?? [])
        } catch {
            throw SwiftDataError(.corruptRecord, "\(aheadLosersTree): the entry of \(id): \(error)")
        }
    }

    /// The local models merged ahead of the zone into the model at `row`
    /// of `entity`, whose saves are not pushed yet.
    static func aheadLosers(into entity: Schema.Entity, row: Int64, _ tx: ReadTransaction) throws -> [(
        id: SyncID, loser: AheadLoser
    )] {
        try ids(in: aheadLosersTree, at: entity, row: row, tx).compactMap { id in try aheadLoser(id, tx).map { (id, $0) } }
    }

    /// Drops the entry of `id`, and those whose saves are pushed.
    static func forgetAheadLosers(_ id: SyncID?, _ tx: WriteTransaction) throws {
        guard let tree = try tx.treeIfPresent(aheadLosersTree) else { return }
        let pushed = try number("pushed", tx)
        var gone: [[UInt8]] = []
        try tx.forEach(tree) { key, value in
            let from = value.count >= 8 ? try RowKey.decode(Array(value[0..<8])) : .min
            if key == id?.bytes || from <= pushed { gone.append(key) }
            return true
        }
        for key in gone { try tx.delete(key, in: tree) }
    }
}
