/// One problem found by ``ModelContainer/checkIntegrity()``.
public struct IntegrityProblem: Hashable, Sendable, CustomStringConvertible {
    /// The entity whose data is wrong.
    public var entity: String
    /// The row concerned, when there is one.
    public var row: Int64?
    /// The engine tree the problem was found in.
    public var tree: String
    /// What is wrong.
    public var reason: String

    /// The tree, the row when there is one, and the reason, on one line.
    public var description: String {
        "\(tree)\(row.map { " row \($0)" } ?? ""): \(reason)"
    }
}

extension ModelContainer {
    /// Checks the object layer on one read snapshot (the engine's own
    /// `check()` covers pages and trees): every record decodes; every
    /// record has its index and unique entries; every index entry points
    /// at a record with those values; no two records share the values of a
    /// unique constraint; every relationship refers to a stored row; every
    /// to-one has its reverse-index entry and no entry lacks its to-one;
    /// every join pair has its mirror; every to-one whose inverse is a
    /// to-one (a one-to-one) is mutual: the row it points at points back.
    ///
    /// Returns the problems found, none for a healthy store. It reads every
    /// record and keeps the expected keys of one entity in memory at a
    /// time. Throws only when the store cannot be read at all.
    ///
    /// With several configurations, each store is checked, and so is the
    /// mark of the last save that wrote several of them: a store whose
    /// mark names another store that did not commit that save (the process
    /// stopped between the two commits) is reported.
    public func checkIntegrity() throws -> [IntegrityProblem] {
        guard parts.isEmpty else { return try parts.flatMap { try $0.checkIntegrity() } + SaveMark.problems(parts) }
        return try store.read { tx in
            var problems: [IntegrityProblem] = []
            var pairs: [String: Set<[UInt8]>] = [:]
            for entity in schema.entities {
                try Self.check(entity, schema: schema, tx: tx, pairs: &pairs, into: &problems)
            }
            // Reverse-index entries no record accounts for: a reverse index
            // of an inherited to-one holds the pairs of every class that
            // has it, so each is checked once all records are read.
            for entity in schema.entities where entity.hasSubentities || entity.superentity != nil {
                for (field, storage) in entity.relationshipStorage where field >= entity.inheritedCount {
                    guard case .toOne(let index) = storage, let tree = try tx.treeIfPresent(index) else { continue }
                    try tx.forEach(tree) { key, _ in
                        if pairs[index]?.contains(key) != true {
                            problems.append(
                                IntegrityProblem(
                                    entity: entity.name, row: PairKey.decode(key)?.1, tree: index,
                                    reason: "an entry matches no record's to-one (\(key.count) bytes)"))
                        }
                        return true
                    }
                }
            }
            return problems
        }
    }

    private static func check(
        _ entity: Schema.Entity, schema: Schema, tx: ReadTransaction, pairs expectedPairs: inout [String: Set<[UInt8]>],
        into problems: inout [IntegrityProblem]
    ) throws {
        guard var check = try EntityCheck(entity, schema: schema, tx: tx, into: &problems) else { return }
        check.expectedPairs = expectedPairs
        try check.records()
        try check.oneToOnesPointBack()
        try check.reverseIndexEntries()
        try check.joinTrees()
        try check.keyEntries()
        expectedPairs = check.expectedPairs
        problems += check.problems
    }
}

/// The integrity check of one entity's data, in steps: its records (each
/// decodes and has its key and reverse-index entries), its one-to-ones,
/// then the entries no record accounts for in its reverse indexes, join
/// trees and key trees.
private struct EntityCheck {
    let entity: Schema.Entity
    let schema: Schema
    let tx: ReadTransaction
    let treeName: String
    let tree: Tree
    let inHierarchy: Bool
    /// Loads the targets of required to-ones, which a model needs to decode.
    let loader: RecordModelLoader?
    var problems: [IntegrityProblem] = []
    var groupTrees: [String: Tree] = [:]
    var destinations: [Int: Schema.Entity] = [:]
    /// Record trees looked up so far, by name.
    var recordTrees: [String: Tree?] = [:]
    /// Index keys every record implies; unique keys with their row.
    /// Reverse-index entries of to-ones are index keys too.
    var expectedIndex: [String: Set<[UInt8]>] = [:]
    var expectedUnique: [String: [[UInt8]: Int64]] = [:]
    /// Reverse-index pairs of a class hierarchy, checked once every class's
    /// records are read.
    var expectedPairs: [String: Set<[UInt8]>] = [:]
    var toOneIndexes: [Int: (name: String, tree: Tree)] = [:]
    /// One-to-one pointers, checked against the other side once the
    /// records are read: (row, field, target).
    var oneToOnes: [(row: Int64, field: Int, target: Int64)] = []

    /// Nil (with the problem noted in `problems`) when the entity's tree
    /// is missing.
    init?(_ entity: Schema.Entity, schema: Schema, tx: ReadTransaction, into problems: inout [IntegrityProblem]) throws {
        self.entity = entity
        self.schema = schema
        self.tx = tx
        treeName = Store.treeName(entity)
        guard let tree = try tx.treeIfPresent(treeName) else {
            problems.append(
                IntegrityProblem(entity: entity.name, row: nil, tree: treeName, reason: "the entity's tree is missing"))
            return nil
        }
        self.tree = tree
        inHierarchy = entity.hasSubentities || entity.superentity != nil
        loader =
            entity.hasRequiredToOne
            ? RecordModelLoader(schema: schema) { entity, row in
                try tx.treeIfPresent(entity.recordTree).flatMap { try tx.get(RowKey.encode(row), in: $0) }
            } : nil
        for group in entity.keyGroups {
            if let groupTree = try tx.treeIfPresent(group.treeName) {
                groupTrees[group.treeName] = groupTree
            } else {
                problem(group.treeName, nil, "the \(group) tree is missing")
            }
        }
        for relationship in entity.relationships {
            guard let type = relationship.destinationType, let target = schema.entity(forType: type) else { continue }
            destinations[relationship.field] = target
        }
        for (field, storage) in entity.relationshipStorage {
            guard case .toOne(let index) = storage else { continue }
            if let indexTree = try tx.treeIfPresent(index) {
                toOneIndexes[field] = (index, indexTree)
            } else {
                problem(index, nil, "the reverse index of \(entity.properties[field].name) is missing")
            }
        }
    }

    mutating func problem(_ tree: String, _ row: Int64?, _ reason: String) {
        problems.append(IntegrityProblem(entity: entity.name, row: row, tree: tree, reason: reason))
    }

    /// The record of a target row, in the tree of the row's own entity
    /// (a relationship to a base class holds rows of its subclasses).
    mutating func record(_ row: Int64, of declared: Schema.Entity) throws -> [UInt8]? {
        guard let entity = declared.concrete(row) else { return nil }
        if recordTrees[entity.recordTree] == nil { recordTrees[entity.recordTree] = try tx.treeIfPresent(entity.recordTree) }
        guard let tree = recordTrees[entity.recordTree] ?? nil else { return nil }
        return try tx.get(RowKey.encode(row), in: tree)
    }

    /// Every record decodes and has its key entries and its to-ones'
    /// reverse-index entries; every to-one refers to a stored row.
    mutating func records() throws {
        try tx.forEach(tree) { rawKey, value in
            guard let row = try? RowKey.decode(rawKey) else {
                problem(treeName, nil, "a key of \(rawKey.count) bytes is not a row id")
                return true
            }
            let model: any PersistentModel
            do {
                model = try _RecordReader.withReader(value, entity: entity, row: row, loader: loader) {
                    try entity.type.init(_strataReader: &$0)
                }
            } catch {
                problem(treeName, row, "the record does not decode: \(error)")
                return true
            }
            try keyEntries(of: model, row: row)
            try toOnes(of: value, row: row)
            return true
        }
    }

    private mutating func keyEntries(of model: any PersistentModel, row: Int64) throws {
        for group in entity.keyGroups {
            guard let groupTree = groupTrees[group.treeName] else { continue }
            let key = group.key(group.values(of: model), row: row)
            switch group.kind {
            case .index:
                expectedIndex[group.treeName, default: []].insert(key)
                if try tx.get(key, in: groupTree) == nil { problem(group.treeName, row, "no entry in the \(group)") }
            case .unique:
                if let other = expectedUnique[group.treeName]?[key] {
                    problem(group.treeName, row, "shares the values of the \(group) with row \(other)")
                    continue
                }
                expectedUnique[group.treeName, default: [:]][key] = row
                let owner = try tx.get(key, in: groupTree).flatMap { try? KeyGroup.row(inUniqueValue: $0) }
                if owner != row {
                    problem(group.treeName, row, "the \(group) entry points at \(owner.map { "row \($0)" } ?? "nothing")")
                }
            }
        }
    }

    /// Each to-one's stored row, read from the record (a required to-one
    /// is loaded with its model, an optional one is a fault).
    private mutating func toOnes(of value: [UInt8], row: Int64) throws {
        for relationship in entity.relationships where relationship.isToOneRelationship {
            let field = relationship.field
            let stored = try? _RecordReader.withReader(value, entity: entity, row: row) { try $0.toOneRow(field: field) }
            guard let target = stored ?? nil else { continue }
            if let index = toOneIndexes[field] {
                let key = PairKey.encode(target, row)
                if inHierarchy {
                    expectedPairs[index.name, default: []].insert(key)
                } else {
                    expectedIndex[index.name, default: []].insert(key)
                }
                if try tx.get(key, in: index.tree) == nil {
                    problem(index.name, row, "no reverse-index entry for \(entity.properties[field].name)")
                }
            }
            if entity.inverseSides[field]?.isToOne == true {
                oneToOnes.append((row, field, target))
            }
            guard let destination = destinations[field] else { continue }
            if try record(target, of: destination) == nil {
                let name = entity.properties[field].name
                problem(treeName, row, "\(name) refers to row \(target), which does not exist")
            }
        }
    }

    /// One-to-ones point back.
    mutating func oneToOnesPointBack() throws {
        for (row, field, target) in oneToOnes {
            guard let side = entity.inverseSides[field], let declared = schema.entity(forType: side.type),
                let other = declared.concrete(target), let bytes = try record(target, of: other)
            else { continue }  // a missing target is reported above
            let back: Int64?
            do {
                back = try _RecordReader.withReader(bytes, entity: other, row: target) {
                    try $0.toOneRow(field: side.field)
                }
            } catch {
                continue  // reported with the other entity's records
            }
            if back != row {
                let name = entity.properties[field].name
                let inverse = other.properties[side.field].name
                problem(
                    treeName, row,
                    "\(name) points at \(other.name) row \(target), whose \(inverse) points at "
                        + (back.map { "row \($0)" } ?? "nothing") + " (a one-to-one must be mutual)")
            }
        }
    }

    /// Reverse-index entries no record accounts for (in a hierarchy,
    /// checked once every class's records are read).
    mutating func reverseIndexEntries() throws {
        for (_, index) in toOneIndexes where !inHierarchy {
            try tx.forEach(index.tree) { key, _ in
                if expectedIndex[index.name]?.contains(key) != true {
                    let rows = PairKey.decode(key)
                    problem(index.name, rows?.1, "an entry matches no record's to-one (\(key.count) bytes)")
                }
                return true
            }
        }
    }

    /// Join trees: each pair has its mirror, and both rows exist (an
    /// inherited to-many's trees are checked with the entity that
    /// declares it, whose rows and its subentities' they hold).
    mutating func joinTrees() throws {
        for (field, storage) in entity.relationshipStorage where field >= entity.inheritedCount {
            guard case .join(let joinName, let mirrorName) = storage else { continue }
            guard let join = try tx.treeIfPresent(joinName), let mirror = try tx.treeIfPresent(mirrorName) else {
                problem(joinName, nil, "the join trees of \(entity.properties[field].name) are missing")
                continue
            }
            let destination = destinations[field]
            try tx.forEach(join) { key, _ in
                guard let (owner, target) = PairKey.decode(key) else {
                    problem(joinName, nil, "an entry is not a pair of rows (\(key.count) bytes)")
                    return true
                }
                if try record(owner, of: entity) == nil {
                    problem(joinName, owner, "the entry's own row does not exist")
                }
                if let destination, try record(target, of: destination) == nil {
                    problem(joinName, owner, "\(entity.properties[field].name) refers to row \(target), which does not exist")
                }
                if try tx.get(PairKey.encode(target, owner), in: mirror) == nil {
                    problem(mirrorName, owner, "the mirror lacks the pair (\(target), \(owner))")
                }
                return true
            }
            try tx.forEach(mirror) { key, _ in
                guard let (target, owner) = PairKey.decode(key) else {
                    problem(mirrorName, nil, "an entry is not a pair of rows (\(key.count) bytes)")
                    return true
                }
                if try tx.get(PairKey.encode(owner, target), in: join) == nil {
                    problem(mirrorName, owner, "the pair (\(target), \(owner)) is not in \(joinName)")
                }
                return true
            }
        }
    }

    /// Key entries no record accounts for.
    mutating func keyEntries() throws {
        for group in entity.keyGroups {
            guard let groupTree = groupTrees[group.treeName] else { continue }
            try tx.forEach(groupTree) { key, value in
                switch group.kind {
                case .index:
                    if expectedIndex[group.treeName]?.contains(key) != true {
                        problem(group.treeName, nil, "an entry matches no record's values (\(key.count) bytes)")
                    }
                case .unique:
                    let row = try? KeyGroup.row(inUniqueValue: value)
                    if row == nil || expectedUnique[group.treeName]?[key] != row {
                        problem(group.treeName, row, "an entry matches no record's values")
                    }
                }
                return true
            }
        }
    }
}
