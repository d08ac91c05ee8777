import Foundation
import StrataEngine

/// Running a planned migration: copying records into the new schema's
/// trees and building its indexes.
extension LightweightMigration {
    /// Carries the migration out in `tx`, or throws
    /// ``SwiftDataError/loadIssueModelContainer`` naming every incompatible change
    /// (nothing is written then).
    ///
    /// `removingEntities` is false for the automatic migration: an entity
    /// that holds rows and is missing from the schema (perhaps a type left
    /// out of the container's list by mistake) is then an incompatible
    /// change, not a silent deletion; a plan's stage may remove it.
    mutating func apply(
        _ tx: WriteTransaction, removingEntities: Bool, progress: (@Sendable (MigrationProgress) -> Void)?
    ) throws {
        if !removingEntities {
            for name in stored.entities.keys.sorted() where schema.entity(named: name) == nil {
                if let tree = try tx.treeIfPresent(Store.treeName(entityName: name)), try tx.count(tree) > 0 {
                    problems.append(
                        "\(name): missing from the schema but holds \(try tx.count(tree)) rows "
                            + "(list its type in the container, or remove it in a migration plan stage)")
                }
            }
        }
        guard problems.isEmpty else {
            throw SwiftDataError(
                .loadIssueModelContainer,
                "the store was written with a different schema and these changes need a custom migration stage: "
                    + problems.joined(separator: "; "))
        }
        let described = described
        var oldTrees: Set<String> = []
        for (name, entity) in stored.entities { oldTrees.formUnion(entity.ownedTrees(entity: name)) }
        var newTrees: Set<String> = []
        for (name, entity) in described { newTrees.formUnion(entity.ownedTrees(entity: name)) }
        let existing = Set(try tx.treeNames())

        // 1. What new trees take from old ones, read before anything changes.
        var joins: [String: Set<Pair>] = [:]
        var externalCopies: [(from: String, to: String)] = []
        for plan in plans {
            let entity = plan.entity
            for relationship in entity.relationships {
                guard case .join(let tree, _)? = entity.relationshipStorage[relationship.field], !oldTrees.contains(tree)
                else { continue }
                var pairs = try oldPairs(plan, relationship.name, tx)
                if let inverse = InverseGraph.inverse(of: entity.type, field: relationship.field),
                    let other = plans.first(where: { ObjectIdentifier($0.entity.type) == ObjectIdentifier(inverse.type) })
                {
                    let name = other.entity.properties[inverse.field].name
                    pairs.formUnion(try oldPairs(other, name, tx).map { Pair($0.second, $0.first) })
                }
                joins[tree] = pairs
            }
            for (field, tree) in entity.externalTrees where !oldTrees.contains(tree) {
                if let source = plan.source[field], let old = plan.old?.storage(of: source.name), old.kind == .external {
                    externalCopies.append((old.tree, tree))
                }
            }
        }
        // A new to-one whose inverse held pairs would lose them.
        for plan in plans {
            // An inherited to-one is its superentity's (same trees), not
            // a new one, even on a subentity the migration adds.
            for relationship in plan.entity.relationships
            where relationship.isToOneRelationship && relationship.field >= plan.entity.inheritedCount {
                guard plan.source[relationship.field] == nil,
                    let inverse = InverseGraph.inverse(of: plan.entity.type, field: relationship.field),
                    let other = plans.first(where: { ObjectIdentifier($0.entity.type) == ObjectIdentifier(inverse.type) }),
                    try !oldPairs(other, other.entity.properties[inverse.field].name, tx).isEmpty
                else { continue }
                throw SwiftDataError(
                    .loadIssueModelContainer,
                    "\(plan.entity.name).\(relationship.name): a new to-one whose inverse already holds related "
                        + "models needs a custom migration stage")
            }
        }

        // 2. Records.
        for plan in plans where plan.rewrite && plan.old != nil {
            try rewriteRecords(plan, tx, progress: progress)
        }

        // 3. New trees, filled.
        for name in newTrees.sorted() where !existing.contains(name) { try tx.createTree(name) }
        for (from, to) in externalCopies where existing.contains(from) {
            let target = try tx.tree(to)
            for (key, value) in try tx.scan(try tx.tree(from)) { try tx.put(key, value, in: target) }
        }
        for (name, pairs) in joins where !pairs.isEmpty {
            let tree = try tx.tree(name)
            let mirror = try tx.tree(StoredStorage.mirror(ofJoin: name))
            for pair in pairs.sorted() { try tx.put(PairKey.encode(pair.first, pair.second), [], in: tree) }
            for pair in pairs.map({ Pair($0.second, $0.first) }).sorted() {
                try tx.put(PairKey.encode(pair.first, pair.second), [], in: mirror)
            }
        }
        for plan in plans where plan.old != nil {
            try rebuildDerived(plan, oldTrees: oldTrees, tx, progress: progress)
        }

        // 4. Trees nobody owns any more.
        for name in oldTrees.subtracting(newTrees).sorted() where existing.contains(name) { try tx.dropTree(name) }

        // 5. The catalog.
        try StoredSchema.write(described, version: schema.version, to: tx)
    }

    /// A unique key's values, for an error message.
    private func values(_ key: [UInt8]) -> String {
        (try? KeyEncoding.decode(key)).map(KeyEncoding.Element.describe) ?? "an undecodable key"
    }

    struct Pair: Hashable, Comparable {
        var first: Int64
        var second: Int64
        init(_ first: Int64, _ second: Int64) {
            self.first = first
            self.second = second
        }
        static func < (a: Pair, b: Pair) -> Bool { (a.first, a.second) < (b.first, b.second) }
    }

    /// The (own row, related row) pairs of the old relationship that the
    /// model's relationship `name` of `plan` comes from, read from its old
    /// storage.
    private func oldPairs(_ plan: EntityPlan, _ name: String, _ tx: ReadTransaction) throws -> Set<Pair> {
        guard let property = plan.entity.properties.first(where: { $0.name == name }),
            let source = plan.source[property.field], let old = plan.old,
            let storage = old.storage(of: source.name), let tree = try tx.treeIfPresent(storage.tree)
        else { return [] }
        var pairs: Set<Pair> = []
        let cursor = try tx.cursor(tree)
        guard try cursor.first() else { return [] }
        try cursor.forEachEntry { key, _ in
            guard let (first, second) = PairKey.decode(key) else {
                throw SwiftDataError(.corruptRecord, "\(storage.tree): an entry is not a pair of rows")
            }
            pairs.insert(storage.kind == .toOne ? Pair(second, first) : Pair(first, second))
            return true
        }
        return pairs
    }

    /// Rewrites every record of `plan`'s entity: each kept field copied
    /// under its new number, fills written, removed fields left out. The
    /// new records go into a fresh tree in key order (appends, so pages
    /// fill up), which then replaces the old one.
    private func rewriteRecords(_ plan: EntityPlan, _ tx: WriteTransaction, progress: (@Sendable (MigrationProgress) -> Void)?)
        throws
    {
        let entity = plan.entity
        let old = try tx.tree(entity.recordTree)
        let total = try tx.count(old)
        // New field ← old field, for record-held fields, in new field order;
        // a fill is encoded once.
        var moves: [(new: Int, old: Int?, fill: [UInt8]?)] = []
        for property in entity.properties where Self.isRecordHeld(property, in: entity) {
            let oldField = plan.source[property.field].flatMap { source in
                plan.old.map { Self.isRecordHeld(source, in: $0) } == true ? source.field : nil
            }
            var fill = plan.fills[property.field].map { value -> [UInt8] in
                var writer = _RecordWriter()
                _ = writer.encodeAny(value, field: property.field)
                return Array(writer.bytes.dropFirst())
            }
            if fill == nil, let record = plan.storedFills[property.field] {
                // The stored fill, under the field's new number.
                guard let (wire, value) = try _RecordReader.firstField(of: record, entity: entity) else {
                    throw SwiftDataError(.corruptRecord, "\(entity.name).\(property.name): the stored default is empty")
                }
                var writer = _RecordWriter()
                value.withUnsafeBytes { writer.appendCopy(field: property.field, wire: wire, value: $0) }
                fill = Array(writer.bytes.dropFirst())
            }
            moves.append((property.field, oldField, fill))
        }
        let slotCount = (plan.old?.properties.count ?? 0) + 1
        let temporary = TreeName.migrating(entity.recordTree)
        if try tx.treeIfPresent(temporary) != nil { try tx.dropTree(temporary) }
        let fresh = try tx.createTree(temporary)
        // Written in row order: its leaves keep room for records that grow
        // later, as a save's do.
        try tx.leaveRoomToGrow(in: fresh)
        var slots = [(wire: UInt8, start: Int, end: Int)?](repeating: nil, count: slotCount)
        var done = 0
        let cursor = try tx.cursor(old)
        if try cursor.first() {
            try cursor.forEachEntry { key, value in
                let row = try RowKey.decode(key)
                var reader = try _RecordReader(borrowing: value, entity: entity, row: row)
                for index in slots.indices { slots[index] = nil }
                for field in try reader.fields() where field.field < slotCount {
                    slots[field.field] = (field.slot.wire, field.valueStart, field.slot.end)
                }
                var writer = _RecordWriter()
                for move in moves {
                    let slot = move.old.flatMap { slots[$0] }
                    if let slot, !(slot.wire == RecordFormat.null && move.fill != nil) {
                        writer.appendCopy(
                            field: move.new, wire: slot.wire,
                            value: UnsafeRawBufferPointer(rebasing: value[slot.start..<slot.end]))
                    } else if let fill = move.fill {
                        writer.bytes.append(contentsOf: fill)
                    }
                }
                try tx.put(Array(key), writer.bytes, in: fresh)
                done += 1
                if done % 65536 == 0 {
                    progress?(
                        MigrationProgress(
                            entityName: entity.name, step: "rewriting records", completedRows: done, totalRows: total))
                }
                return true
            }
        }
        progress?(MigrationProgress(entityName: entity.name, step: "rewriting records", completedRows: done, totalRows: total))
        try tx.dropTree(entity.recordTree)
        try tx.renameTree(temporary, to: entity.recordTree)
    }

    /// Builds the unique, index and reverse-index trees of `plan`'s entity
    /// that are new, or whose values a fill changed, in one pass over the
    /// records. Unique keys that collide are reported together.
    private func rebuildDerived(
        _ plan: EntityPlan, oldTrees: Set<String>, _ tx: WriteTransaction,
        progress: (@Sendable (MigrationProgress) -> Void)?
    ) throws {
        let entity = plan.entity
        let filled = Set(plan.fills.keys)
        let groups = entity.keyGroups.filter { group in
            !oldTrees.contains(group.treeName) || group.properties.contains { filled.contains($0.field) }
        }
        var reverse: [(field: Int, tree: String)] = []
        for relationship in entity.relationships {
            if case .toOne(let index)? = entity.relationshipStorage[relationship.field], !oldTrees.contains(index) {
                reverse.append((relationship.field, index))
            }
        }
        guard !groups.isEmpty || !reverse.isEmpty else { return }
        let records = try tx.tree(entity.recordTree)
        let total = try tx.count(records)
        var groupKeys = groups.map { IndexKeys($0, rows: total) }
        var reverseKeys = Array(repeating: [Pair](), count: reverse.count)
        var done = 0
        let cursor = try tx.cursor(records)
        if try cursor.first() {
            try groupKeys.withUnsafeMutableBufferPointer { groupKeys in
                try cursor.forEachEntry { key, value in
                    let row = try RowKey.decode(key)
                    var reader = try _RecordReader(borrowing: value, entity: entity, row: row)
                    for index in groupKeys.indices { try groupKeys[index].add(&reader, row: row) }
                    for (index, relationship) in reverse.enumerated() {
                        if let target = try reader.toOneRow(field: relationship.field) {
                            reverseKeys[index].append(Pair(target, row))
                        }
                    }
                    done += 1
                    if done % 65536 == 0 {
                        progress?(
                            MigrationProgress(entityName: entity.name, step: "indexing", completedRows: done, totalRows: total))
                    }
                    return true
                }
            }
        }
        for index in groupKeys.indices {
            groupKeys[index].sort()
            let keys = groupKeys[index]
            let group = keys.group
            if group.kind == .unique {
                var collisions: [String] = []
                for i in 1..<max(keys.count, 1) where keys.sharesValues(i) {
                    collisions.append("rows \(keys.row(i - 1)) and \(keys.row(i)) share \(values(keys.value(i)))")
                }
                if !collisions.isEmpty {
                    let shown = collisions.prefix(20).joined(separator: "; ")
                    let more = collisions.count > 20 ? " (and \(collisions.count - 20) more)" : ""
                    throw SwiftDataError(
                        .uniqueConstraintViolation,
                        "cannot add \(group) to \(entity.name): \(collisions.count) collision(s): \(shown)\(more)")
                }
            }
            let tree = try tx.tree(group.treeName)
            try tx.clear(tree)
            let unique = group.kind == .unique
            try keys.forEachBatch { batch, first in
                try tx.put(sortedKeys: batch, values: { unique ? KeyGroup.uniqueValue(keys.row(first + $0)) : [] }, in: tree)
            }
            groupKeys[index] = IndexKeys(group, rows: 0)
        }
        for (index, relationship) in reverse.enumerated() {
            let tree = try tx.tree(relationship.tree)
            for pair in reverseKeys[index].sorted() { try tx.put(PairKey.encode(pair.first, pair.second), [], in: tree) }
        }
        progress?(MigrationProgress(entityName: entity.name, step: "indexing", completedRows: done, totalRows: total))
    }
}
