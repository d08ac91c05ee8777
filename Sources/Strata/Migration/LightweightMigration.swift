import Foundation
import StrataEngine

/// The changes from a stored schema to a model schema that need no code,
/// and their execution inside a write transaction.
///
/// Properties are matched by name, or by `originalName` for a rename.
/// Lightweight (SwiftData's list): an added attribute that is optional or
/// has a default; a removed property; a rename; non-optional → optional;
/// optional → non-optional with a default; added, removed and renamed
/// relationships; to-one → to-many; added and removed indexes and unique
/// constraints; added and removed entities; a reordering of properties.
/// Anything else — a changed type, to-many → to-one, an attribute becoming
/// a relationship, moving in or out of external storage — is an
/// incompatible change, named in the error.
///
/// What changes on disk:
/// - records are rewritten only when a kept field moves to another
///   number, a new field takes a number old records may hold, or a
///   default an earlier migration stored differs from the one the model
///   declares now; each field is then copied under its new number without
///   being decoded. Renames, added attributes with a default, optional →
///   non-optional with a default and removed fields leave records alone:
///   the catalog stores the defaults (readers apply them where a record
///   has no value) and how many field numbers records may hold;
/// - derived trees are rebuilt from the records when their name is new or
///   their values change: unique constraints (colliding rows are an error
///   listing them — no silent dedupe), indexes, to-one reverse indexes;
/// - a new join tree takes the pairs of the relationship it comes from,
///   whatever its old storage (a to-one's reverse index, a join, a mirror);
/// - trees no entity owns any more are dropped; the catalog is rewritten
///   with each property's stable id.
struct LightweightMigration {
    let stored: StoredSchema
    let schema: Schema
    private(set) var plans: [EntityPlan] = []
    /// Every incompatible change, as `Entity.property: what`.
    private(set) var problems: [String] = []
    /// Every change, for messages.
    private(set) var changes: [String] = []

    /// What happens to one entity of the model schema.
    struct EntityPlan {
        let entity: Schema.Entity
        let old: StoredEntity?
        /// The old property each new field takes its value from.
        var source: [Int: StoredEntity.Property] = [:]
        /// Values written where the old value is nil or absent, by field.
        var fills: [Int: Any] = [:]
        /// Stable ids, by field.
        var ids: [Int: Int] = [:]
        /// Whether records must be rewritten.
        var rewrite = false
        /// Fills an earlier migration stored in the catalog instead of the
        /// records (``StoredEntity/fills``), by new field.
        var storedFills: [Int: [UInt8]] = [:]
        /// Without a rewrite: the fills the new catalog records, by name,
        /// and the limit of field numbers records may hold.
        var catalogFills: [String: [UInt8]] = [:]
        var recordFields: Int?
    }

    /// Whether an added non-optional attribute without a default may be
    /// filled with a placeholder (a custom stage's `didMigrate` sets it).
    private let allowsPlaceholders: Bool
    /// The attributes filled with a placeholder, by entity name.
    private(set) var placeholders: [String: [Int]] = [:]

    init(stored: StoredSchema, schema: Schema, allowsPlaceholders: Bool = false) {
        self.stored = stored
        self.schema = schema
        self.allowsPlaceholders = allowsPlaceholders
        for entity in schema.entities {
            guard let old = stored.entities[entity.name] else {
                if !stored.entities.isEmpty { changes.append("\(entity.name): added") }
                plans.append(EntityPlan(entity: entity, old: nil))
                continue
            }
            plans.append(plan(entity, from: old))
        }
        for name in stored.entities.keys.sorted() where schema.entity(named: name) == nil {
            changes.append("\(name): removed")
        }
    }

    private static func isRecordHeld(_ property: StoredEntity.Property, in old: StoredEntity) -> Bool {
        switch property.kind {
        case "attribute": return old.storage(of: property.name)?.kind != .external
        case "to-one": return true
        default: return false
        }
    }

    private static func isRecordHeld(_ property: Schema.Property, in entity: Schema.Entity) -> Bool {
        entity.holdsInRecord(property.field)
    }

    private mutating func plan(_ entity: Schema.Entity, from old: StoredEntity) -> EntityPlan {
        var plan = EntityPlan(entity: entity, old: old)
        var used: Set<String> = []
        var nextID = (old.properties.map(\.id).max() ?? 0) + 1
        let name = entity.name
        for property in entity.properties {
            let candidates = [property.originalName, property.name].compactMap { $0 }
            guard let source = candidates.lazy.compactMap({ old.property(named: $0) }).first(where: { !used.contains($0.name) })
            else {
                plan.ids[property.field] = nextID
                nextID += 1
                planAdded(property, of: entity, into: &plan)
                continue
            }
            used.insert(source.name)
            plan.ids[property.field] = source.id
            plan.source[property.field] = source
            if source.name != property.name { changes.append("\(name).\(source.name): renamed \(property.name)") }
            planKept(property, from: source, of: entity, old: old, into: &plan)
        }
        for property in old.properties where !used.contains(property.name) {
            changes.append("\(name).\(property.name): removed")
        }
        Self.planRewrite(&plan, of: entity, from: old)
        return plan
    }

    /// A property the stored entity does not have: a fill for its records
    /// (its default value, or a placeholder didMigrate replaces), or a
    /// problem when it needs one and has none.
    private mutating func planAdded(_ property: Schema.Property, of entity: Schema.Entity, into plan: inout EntityPlan) {
        let name = entity.name
        let place = "\(name).\(property.name)"
        let kind = StoredEntity.kind(of: property)
        changes.append("\(place): added")
        if kind == "attribute" && !property.isOptional {
            if entity.externalTrees[property.field] != nil {
                problems.append("\(place): an added non-optional external-storage attribute needs a custom stage")
            } else if let value = property.defaultValue, Self.encodes(value) {
                plan.fills[property.field] = value
            } else if allowsPlaceholders, (property.valueType as? any _RecordPrimitive.Type)?.hasPlaceholder == true,
                !entity.uniquenessConstraints.contains(where: { $0.contains(property.name) })
            {
                // No value in the record until didMigrate sets one.
                plan.fills[property.field] = String?.none as Any
                placeholders[name, default: []].append(property.field)
            } else {
                problems.append(
                    "\(place): an added non-optional attribute needs a default value"
                        + (allowsPlaceholders
                            ? " (didMigrate can fill only plain types that are not unique: numbers, String, Date, …)"
                            : ""))
            }
        }
    }

    /// A property kept from `source`: the changes of type or kind a
    /// lightweight migration can make, and problems for the others.
    private mutating func planKept(
        _ property: Schema.Property, from source: StoredEntity.Property, of entity: Schema.Entity, old: StoredEntity,
        into plan: inout EntityPlan
    ) {
        let place = "\(entity.name).\(property.name)"
        let kind = StoredEntity.kind(of: property)
        let type = "\(property.valueType)"
        switch (source.kind, kind) {
        case ("attribute", "attribute"):
            if StoredEntity.baseType(source.type) != StoredEntity.baseType(type) {
                problems.append("\(place): its type changed from \(source.type) to \(type)")
            } else if (old.storage(of: source.name)?.kind == .external) != (entity.externalTrees[property.field] != nil) {
                problems.append("\(place): moving into or out of external storage needs a custom stage")
            } else if source.type != type {
                changes.append("\(place): \(source.type) → \(type)")
                if !property.isOptional {
                    if let value = property.defaultValue, Self.encodes(value) {
                        plan.fills[property.field] = value
                    } else {
                        problems.append("\(place): optional → non-optional needs a default value")
                    }
                }
            }
        case ("to-one", "to-one"), ("to-many", "to-many"), ("to-one", "to-many"):
            if StoredEntity.baseType(source.type, array: true) != StoredEntity.baseType(type, array: true) {
                problems.append("\(place): its destination changed from \(source.type) to \(type)")
            } else if source.kind != kind {
                changes.append("\(place): to-one → to-many")
            }
        case ("to-many", "to-one"):
            problems.append("\(place): to-many → to-one needs a custom stage")
        default:
            problems.append("\(place): \(source.kind) → \(kind) needs a custom stage")
        }
    }

    /// Whether the entity's records are rewritten, or only its catalog
    /// entry changes.
    private static func planRewrite(_ plan: inout EntityPlan, of entity: Schema.Entity, from old: StoredEntity) {
        // Records are rewritten only when a kept field changes its number,
        // or a new field takes a number old records may hold (one a
        // removed field had). Removed fields stay in old records, past or
        // between the fields readers ask for; fills go to the catalog.
        let oldLimit = old.recordFields ?? old.properties.count
        for property in entity.properties where Self.isRecordHeld(property, in: entity) {
            if let source = plan.source[property.field], Self.isRecordHeld(source, in: old) {
                if source.field != property.field { plan.rewrite = true }
            } else if property.field < oldLimit {
                plan.rewrite = true
            }
        }
        for (oldName, record) in old.fills {
            // A removed attribute's fill goes with it.
            guard let property = entity.properties.first(where: { plan.source[$0.field]?.name == oldName }) else { continue }
            plan.storedFills[property.field] = record
            // Records without a value read the model's declared default:
            // when that is no longer the stored one, the stored one is
            // written into them.
            if entity.defaultRecords[property.field] != record { plan.rewrite = true }
        }
        // A default that is another value each time the model's schema is
        // made (`Date.now`, `UUID()`) cannot be stored once and read again
        // by the next launch's model: it is written into the records.
        if !plan.rewrite, plan.fills.keys.contains(where: { entity.defaultRecords[$0] != nil }) {
            let again = Schema.Entity(entity.type).defaultRecords
            if plan.fills.keys.contains(where: { again[$0] != entity.defaultRecords[$0] }) { plan.rewrite = true }
        }
        if !plan.rewrite {
            for (field, record) in plan.storedFills { plan.catalogFills[entity.properties[field].name] = record }
            for field in plan.fills.keys {
                // A placeholder's attribute has no default; didMigrate sets it.
                if let record = entity.defaultRecords[field] { plan.catalogFills[entity.properties[field].name] = record }
            }
            let limit = max(oldLimit, entity.properties.count)
            plan.recordFields = limit > entity.properties.count ? limit : nil
        }
    }

    /// Whether a default value can be written into records.
    private static func encodes(_ value: Any) -> Bool {
        var writer = _RecordWriter()
        return writer.encodeAny(value, field: 0)
    }

    /// The new descriptions, with each property's stable id.
    var described: [String: StoredEntity] {
        Dictionary(
            uniqueKeysWithValues: plans.map { plan in
                var entity = StoredEntity(plan.entity, ids: plan.ids)
                entity.fills = plan.catalogFills
                entity.recordFields = plan.recordFields
                return (plan.entity.name, entity)
            })
    }

    // MARK: Execution

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

extension _RecordPrimitive {
    static var hasPlaceholder: Bool { _placeholder != nil }
}
