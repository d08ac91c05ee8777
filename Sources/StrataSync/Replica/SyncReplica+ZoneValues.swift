import Foundation
import Strata
import StrataEngine

// The zone's values of the attributes of unique constraints, per model:
// what the zone's changes this store applied or pushed last set them to,
// whatever local saves not pushed yet did since. An update pulled from the
// zone that gives a model the values another model holds in the zone
// collides with it there, even when a local save not pushed yet moved that
// model's values away here: every other device merges the two, so this
// one does too (see `SyncReplica+Merge`), and the local save's values go
// on top when it is pushed.
//
// `sync.zoneValues`: entity name (UTF-8), 0, row (8 bytes, RowKey) → an
// encoded `SyncChangeSet` of one change holding those attributes. Written
// for entities with unique constraints only; a model without an entry
// (stored before this tree existed) has its stored values.

extension SyncReplica {
    static let zoneValuesTree = "sync.zoneValues"

    /// The names of the attributes of `entity`'s unique constraints.
    static func uniqueNames(_ entity: Schema.Entity) -> Set<String> {
        Set(entity.uniqueGroups.flatMap { $0.properties.map(\.name) })
    }

    /// `names` with every attribute of each compound unique constraint
    /// they touch. A compound constraint's values travel as one: a save
    /// that changes one of them sends them all, and a local save not
    /// pushed yet keeps them all here. Otherwise a pulled change of one
    /// and a local change of another would make, here, a value that no
    /// device chose and that the zone holds only once the local save
    /// arrives (and a merge ahead of the zone on it could be undone by the
    /// changes in between).
    static func wholeConstraints(_ names: Set<String>, _ entity: Schema.Entity) -> Set<String> {
        var whole = names
        for group in entity.uniqueGroups where group.properties.count > 1 {
            let members = Set(group.properties.map(\.name))
            if !members.isDisjoint(with: names) { whole.formUnion(members) }
        }
        return whole
    }

    /// The rows of `entity` but `row` whose zone values of the attributes
    /// `names` are those of `values` (a scan of the entity's entries, for
    /// the rare change that meets a model deleted here).
    static func zoneRows(
        _ entity: Schema.Entity, holding values: [String: SyncChangeSet.Field], of names: Set<String>, except row: Int64,
        _ tx: ReadTransaction
    ) throws -> [Int64] {
        guard let tree = try tx.treeIfPresent(zoneValuesTree) else { return [] }
        let prefix = Array(entity.name.utf8) + [0]
        var rows: [Int64] = []
        var failure: (any Error)?
        try tx.forEach(tree, from: prefix) { key, bytes in
            guard key.count == prefix.count + 8, Array(key.prefix(prefix.count)) == prefix else { return false }
            do {
                let other = try RowKey.decode(Array(key.suffix(8)))
                guard other != row else { return true }
                let fields = try SyncChangeSet.decode(bytes).changes.first?.fields ?? []
                let theirs = Dictionary(fields.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
                if names.allSatisfy({ values[$0] != nil && theirs[$0] == values[$0] }) { rows.append(other) }
            } catch {
                failure = SwiftDataError(.corruptRecord, "\(zoneValuesTree): an entry of \(entity.name): \(error)")
                return false
            }
            return true
        }
        if let failure { throw failure }
        return rows
    }

    /// The zone's values recorded for `row`, by attribute name.
    static func zoneValues(_ entity: Schema.Entity, row: Int64, _ tx: ReadTransaction) throws
        -> [String: SyncChangeSet.Field]?
    {
        guard let tree = try tx.treeIfPresent(zoneValuesTree), let bytes = try tx.get(rowKey(entity.name, row), in: tree)
        else { return nil }
        let set: SyncChangeSet
        do {
            set = try SyncChangeSet.decode(bytes)
        } catch {
            throw SwiftDataError(.corruptRecord, "\(zoneValuesTree): the entry of \(entity.name) row \(row): \(error)")
        }
        return Dictionary((set.changes.first?.fields ?? []).map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// Records that the zone set `fields` (those of unique constraints) of
    /// the model at `row`; an entry that holds them already is left as it
    /// is (most changes leave a unique value alone).
    static func recordZoneValues(_ entity: Schema.Entity, row: Int64, _ fields: [SyncChangeSet.Field], _ tx: WriteTransaction)
        throws
    {
        let names = uniqueNames(entity)
        let set = fields.filter { names.contains($0.name) }
        guard !set.isEmpty else { return }
        let stored = try zoneValues(entity, row: row, tx)
        var values = stored ?? [:]
        for field in set { values[field.name] = field }
        if let stored, stored == values { return }
        let change = SyncChangeSet.Change(
            kind: .update, entity: entity.name, id: SyncID(bytes: Array(repeating: 0, count: 16)),
            fields: values.sorted { $0.key < $1.key }.map(\.value))
        let tree = try tx.treeIfPresent(zoneValuesTree) ?? tx.createTree(zoneValuesTree)
        try tx.put(rowKey(entity.name, row), SyncChangeSet(changes: [change]).encode(), in: tree)
    }

    static func forgetZoneValues(_ entity: Schema.Entity, row: Int64, _ tx: WriteTransaction) throws {
        if let tree = try tx.treeIfPresent(zoneValuesTree) { try tx.delete(rowKey(entity.name, row), in: tree) }
    }
}

extension SyncReplica.ChangeApplication {
    /// The stored model that holds here the values of a unique constraint
    /// that the pulled `fields` give the model at `row`, where a local save
    /// not pushed yet changed them on that model (so the model keeps its
    /// own values here, and the store's unique index finds no collision):
    /// in the zone's order the two collide now, and every other device
    /// merges them. The holder may hold the values by a local save not
    /// pushed yet too (`masked`): that save comes later in the zone's order.
    func localHolder(ofMasked fields: [Field], _ entity: Schema.Entity, row: Int64) throws
        -> (row: Int64, names: Set<String>, masked: Bool)?
    {
        guard !entity.uniqueGroups.isEmpty, case let mask?? = masks[entity.name]?[row] else { return nil }
        for group in entity.uniqueGroups {
            let names = Set(group.properties.map(\.name))
            guard !names.isDisjoint(with: mask), fields.contains(where: { names.contains($0.name) }) else { continue }
            // The model as the zone has it: stored, with the zone's
            // values of the constraint and the change's on top.
            var values = Dictionary(
                try replica.storedAttributes(entity, row: row, only: nil).map { ($0.name, $0) },
                uniquingKeysWith: { _, last in last })
            let zone = try store.read { tx in try SyncReplica.zoneValues(entity, row: row, tx) } ?? [:]
            for (name, field) in zone where names.contains(name) { values[name] = field }
            for field in fields where names.contains(field.name) { values[field.name] = field }
            guard let zoneModel = try? replica.make(entity, Array(values.values), seq: seq) else { continue }
            let key = group.key(group.values(of: zoneModel), row: 0)
            let holder: Int64? = try store.read { tx in
                guard let tree = try tx.treeIfPresent(group.treeName), let bytes = try tx.get(key, in: tree) else {
                    return nil
                }
                return try KeyGroup.row(inUniqueValue: bytes)
            }
            guard let holder, holder != row else { continue }
            // A local save that moved this model off the values before the
            // one that gave them to the holder: in the zone's order the
            // holder finds them free.
            let (movedFrom, holderTokens) = try store.read { tx in
                (try SyncReplica.aheadMask(entity, row: row, tx)?.from, try SyncReplica.unpushedTokens(entity, row: holder, tx))
            }
            if let movedFrom, let given = names.compactMap({ holderTokens[$0] }).max(), movedFrom < given { continue }
            return (holder, names, masks[entity.name]?[holder] != nil)
        }
        return nil
    }

    /// The model of `entity` that holds in the zone the values of a unique
    /// constraint that the pulled `fields` give the model at `row`, while a
    /// local save not pushed yet moved its values away here (a holder of
    /// the values here is found by the store's unique index instead).
    func zoneHolder(of fields: [Field], _ entity: Schema.Entity, row: Int64) throws -> (row: Int64, names: Set<String>)? {
        guard !entity.uniqueGroups.isEmpty, let masked = masks[entity.name] else { return nil }
        let groups = entity.uniqueGroups.map { Set($0.properties.map(\.name)) }
        return try store.read { tx in
            var mine: [String: Field]?
            for (other, mask) in masked where other != row {
                // A model a local save inserted is not in the zone yet.
                guard let names = mask else { continue }
                for group in groups where !group.isDisjoint(with: names) {
                    guard let theirs = try SyncReplica.zoneValues(entity, row: other, tx) else { continue }
                    if mine == nil {
                        var values = try SyncReplica.zoneValues(entity, row: row, tx) ?? [:]
                        for field in fields { values[field.name] = field }
                        mine = values
                    }
                    if group.allSatisfy({ name in mine?[name] != nil && mine?[name] == theirs[name] }) {
                        return (other, group)
                    }
                }
            }
            return nil
        }
    }
}
