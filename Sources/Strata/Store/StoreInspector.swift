import Foundation
import StrataEngine

/// What the `strata` tool reads of a store without its model types: the
/// stored schema, rows per entity, record checks against the stored
/// schema, and the history. For the package's own use.
package enum StoreInspector {
    /// The entity record readers are given when no model type describes
    /// the records (the reader only walks fields here).
    private static let placeholder = Schema(types: [_InspectedRecord.self], version: Schema.Version(0, 0, 0)).entities[0]

    /// The stored schema as text: the version and hash, then each entity's
    /// properties and keys. Nil when the store has no stored schema.
    package static func schemaText(_ tx: ReadTransaction) throws -> String? {
        let stored = try StoredSchema(tx)
        guard !stored.entities.isEmpty else { return nil }
        var lines = ["version \(stored.version ?? "unknown"), hash \(stored.hash ?? "none")"]
        for (name, entity) in stored.entities.sorted(by: { $0.key < $1.key }) {
            lines.append("entity \(name)" + (entity.superentity.map { " (subclass of \($0))" } ?? ""))
            for property in entity.properties {
                let detail = property.detail.isEmpty ? "" : " [\(property.detail)]"
                lines.append(
                    "  \(property.field) \(property.name): \(property.type) (\(property.kind), id \(property.id))\(detail)")
            }
            for key in entity.keys { lines.append("  " + key) }
        }
        return lines.joined(separator: "\n")
    }

    /// The history, one line per transaction (token, author, time,
    /// process) and one per change.
    package static func historyText(_ tx: ReadTransaction) throws -> [String] {
        guard let tree = try tx.treeIfPresent(HistoryLog.transactions) else { return [] }
        var lines: [String] = []
        let deleted = try HistoryLog.deletedThrough(tx)
        if deleted > 0 { lines.append("history deleted through token \(deleted)") }
        let formatter = ISO8601DateFormatter()
        try tx.forEach(tree) { key, value in
            guard HistoryLog.isToken(key) else { return false }
            let raw = try HistoryLog.decodeRaw(value, token: try RowKey.decode(key))
            lines.append(
                "token \(raw.token)  author \(raw.author ?? "-")  \(formatter.string(from: raw.timestamp))  \(raw.process)")
            for change in raw.changes {
                switch change.kind {
                case .insert: lines.append("  insert \(change.entity) row \(change.row)")
                case .update:
                    lines.append("  update \(change.entity) row \(change.row): \(change.attributes.joined(separator: ", "))")
                case .delete:
                    let preserved = change.tombstone.isEmpty ? "" : " (tombstone of \(change.tombstone.count) bytes)"
                    lines.append("  delete \(change.entity) row \(change.row)\(preserved)")
                }
            }
            return true
        }
        return lines
    }

    /// Writes every record of `entity` (all entities when nil), decoded
    /// with the stored schema, one line each: JSON objects (`json`) or
    /// `Entity pN: name=value …`. Values: numbers, strings, Dates as
    /// ISO 8601, Data and undecodable payloads as base64, a to-one as its
    /// row id, nil as null. Types the tool cannot tell from their name
    /// (enums, Codable values) are shown by their wire form.
    package static func dump(
        _ tx: ReadTransaction, entity only: String?, json: Bool, line: (String) -> Void,
        progress: (Int, Int) -> Void = { _, _ in }
    ) throws {
        let stored = try StoredSchema(tx)
        if let only, stored.entities[only] == nil {
            throw SwiftDataError(
                .unknownModelType,
                "the store has no entity \(only) (it has \(stored.entities.keys.sorted().joined(separator: ", ")))")
        }
        let names = only.map { [$0] } ?? stored.entities.keys.sorted()
        let total = try rowCounts(tx).filter { names.contains($0.entity) }.reduce(0) { $0 + $1.rows }
        var done = 0
        for name in names {
            guard let entity = stored.entities[name], let tree = try tx.treeIfPresent(Store.treeName(entityName: name))
            else { continue }
            let cursor = try tx.cursor(tree)
            var more = try cursor.first()
            while more {
                let (key, value) = (try cursor.key(), try cursor.value())
                more = try cursor.next()
                let row = try RowKey.decode(key)
                var pairs: [(String, DumpValue)] = []
                do {
                    try value.withUnsafeBytes { raw in
                        var reader = try _RecordReader(borrowing: raw, entity: placeholder, row: row)
                        var shownFields: Set<Int> = []
                        for field in try reader.fields() {
                            let property = field.field < entity.properties.count ? entity.properties[field.field] : nil
                            // A field a migration removed without rewriting records.
                            if property == nil, field.field < entity.recordFields ?? 0 { continue }
                            if let property, field.slot.wire == RecordFormat.null, entity.fills[property.name] != nil {
                                continue
                            }
                            let shown = try DumpValue(&reader, field.slot, field: field.field, property: property)
                            pairs.append((property?.name ?? "_field\(field.field)", shown))
                            shownFields.insert(field.field)
                        }
                        // Values a migration added as stored defaults.
                        for property in entity.properties where !shownFields.contains(property.field) {
                            guard let record = entity.fills[property.name] else { continue }
                            try record.withUnsafeBytes { raw in
                                var fill = try _RecordReader(borrowing: raw, entity: placeholder, row: row)
                                guard let slot = try fill.find(property.field) else { return }
                                pairs.append(
                                    (property.name, try DumpValue(&fill, slot, field: property.field, property: property)))
                            }
                        }
                        pairs.sort { a, b in
                            (entity.property(named: a.0)?.field ?? Int.max) < (entity.property(named: b.0)?.field ?? Int.max)
                        }
                    }
                } catch {
                    pairs = [("_error", .text("undecodable record"))]
                }
                if json {
                    let body = ([("entity", DumpValue.text(name)), ("row", .number("\(row)"))] + pairs)
                        .map { "\(DumpValue.text($0.0).json):\($0.1.json)" }
                    line("{" + body.joined(separator: ",") + "}")
                } else {
                    line("\(name) p\(row): " + pairs.map { "\($0.0)=\($0.1.plain)" }.joined(separator: " "))
                }
                done += 1
                if done % 4096 == 0 { progress(done, total) }
            }
        }
        progress(done, total)
    }

    /// Rows per stored entity, by name.
    package static func rowCounts(_ tx: ReadTransaction) throws -> [(entity: String, rows: Int)] {
        try StoredSchema(tx).entities.keys.sorted().map { name in
            let tree = try tx.treeIfPresent(Store.treeName(entityName: name))
            return (name, try tree.map { try tx.count($0) } ?? 0)
        }
    }

    /// Checks every record against the stored schema: it parses (known
    /// wire types, fields in order, lengths in bounds), its field numbers
    /// are the entity's, each field's wire type fits its stored type, and
    /// each to-one points at a stored row, and each to-one whose inverse
    /// is a to-one (a one-to-one) is pointed back at. `progress` gets
    /// (rows done, rows in all). Problems are capped at `limit`.
    package static func checkRecords(
        _ tx: ReadTransaction, limit: Int = 1000, progress: (Int, Int) -> Void = { _, _ in }
    ) throws -> [String] {
        let stored = try StoredSchema(tx)
        var problems: [String] = []
        let total = try rowCounts(tx).reduce(0) { $0 + $1.rows }
        var done = 0
        let inverses = oneToOneInverses(stored)
        // One-to-one pointers to check once every record is read.
        var pointers: [(entity: String, row: Int64, field: Int, target: Int64)] = []
        var sharedPairs: [String: (count: Int, what: String)] = [:]
        let parents = Set(stored.entities.values.compactMap(\.superentity))
        for (name, entity) in stored.entities.sorted(by: { $0.key < $1.key }) {
            guard let tree = try tx.treeIfPresent(Store.treeName(entityName: name)) else {
                problems.append("entity \(name): its record tree e.\(name) is missing")
                continue
            }
            var targets: [Int: [Int64: Tree]] = [:]
            for property in entity.properties where property.kind == "to-one" {
                let destination = StoredEntity.baseType(property.type, array: true)
                if try tx.treeIfPresent(Store.treeName(entityName: destination)) != nil {
                    // A to-one to a class holds rows of its subclasses too,
                    // each in its own tree, known by the row's tag.
                    var byTag: [Int64: Tree] = [:]
                    for member in family(of: destination, in: stored) {
                        guard let tree = try tx.treeIfPresent(Store.treeName(entityName: member)) else { continue }
                        byTag[member == root(of: member, in: stored) ? 0 : Schema.Entity.rowTag(of: member)] = tree
                    }
                    targets[property.field] = byTag
                } else {
                    problems.append("\(name).\(property.name): the destination \(destination) has no record tree")
                }
            }
            // Non-nil to-ones per field, to compare with their reverse indexes.
            var toOnes: [Int: Int] = [:]
            let cursor = try tx.cursor(tree)
            var more = try cursor.first()
            while more, problems.count < limit {
                let (key, value) = (try cursor.key(), try cursor.value())
                more = try cursor.next()
                done += 1
                if done % 65536 == 0 { progress(done, total) }
                guard key.count == 8 else {
                    problems.append("\(TreeName.records(name)): a key of \(key.count) bytes is not a row id")
                    continue
                }
                let row = try RowKey.decode(key)
                do {
                    try problems += checkFields(
                        value, row: row, entity: entity, name: name, targets: targets, tx: tx, toOnes: &toOnes)
                    for field in entity.properties.map(\.field) where inverses[Pointer(name, field)] != nil {
                        if let target = try toOneRow(value, field: field, row: row) {
                            pointers.append((name, row, field, target))
                        }
                    }
                } catch let error as SwiftDataError {
                    // The reader names the placeholder entity; name the real one.
                    let message = error.message.replacingOccurrences(of: "\(placeholder.name) row \(row)", with: "")
                    problems.append("\(TreeName.records(name)) row \(row)\(message)")
                }
            }
            if problems.count < limit {
                try problems += checkDerived(
                    name: name, entity: entity, rows: try tx.count(tree), toOnes: toOnes, tx: tx,
                    inHierarchy: entity.superentity != nil || parents.contains(name), shared: &sharedPairs)
            }
        }
        // A reverse index of an inherited to-one holds the pairs of every
        // class of the hierarchy.
        for (index, expected) in sharedPairs.sorted(by: { $0.key < $1.key }) where problems.count < limit {
            guard let tree = try tx.treeIfPresent(index) else {
                problems.append("\(index): missing (\(expected.what))")
                continue
            }
            let count = try tx.count(tree)
            if count != expected.count {
                problems.append("\(index): \(count) entries, expected \(expected.count) (\(expected.what))")
            }
        }
        problems += try unmatched(pointers, inverses: inverses, stored: stored, tx: tx, limit: limit - problems.count)
        progress(done, total)
        return Array(problems.prefix(limit))
    }

    /// The one-to-one pointers (read from the records) whose target does
    /// not point back, as problems, at most `limit`.
    private static func unmatched(
        _ pointers: [(entity: String, row: Int64, field: Int, target: Int64)], inverses: [Pointer: Pointer],
        stored: StoredSchema, tx: ReadTransaction, limit: Int
    ) throws -> [String] {
        var problems: [String] = []
        for pointer in pointers where problems.count < limit {
            guard let inverse = inverses[Pointer(pointer.entity, pointer.field)],
                let tree = try tx.treeIfPresent(Store.treeName(entityName: inverse.entity)),
                let bytes = try tx.get(RowKey.encode(pointer.target), in: tree)
            else { continue }  // a missing target is reported with the record
            // A target record that does not parse reads as pointing at
            // nothing here (and is reported with its own entity too).
            guard let back = try? toOneRow(bytes, field: inverse.field, row: pointer.target), back == pointer.row
            else {
                let from: String = stored.entities[pointer.entity]?.properties[pointer.field].name ?? "?"
                let to: String = stored.entities[inverse.entity]?.properties[inverse.field].name ?? "?"
                let backText: String =
                    (try? toOneRow(bytes, field: inverse.field, row: pointer.target)).flatMap { $0 }
                    .map { "row \($0)" } ?? "nothing"
                let at =
                    "\(TreeName.records(pointer.entity)) row \(pointer.row): \(from) points at "
                    + "\(inverse.entity) row \(pointer.target)"
                problems.append(at + ", whose \(to) points at \(backText) (a one-to-one must be mutual)")
                continue
            }
        }
        return problems
    }

    /// The stored entity `name` and every entity below it, by the stored
    /// schema's `super` lines.
    private static func family(of name: String, in stored: StoredSchema) -> [String] {
        stored.entities.keys.sorted().filter { member in
            var current: String? = member
            var steps = 0
            while let entity = current, steps <= stored.entities.count {
                if entity == name { return true }
                current = stored.entities[entity]?.superentity
                steps += 1
            }
            return false
        }
    }

    /// The entity at the top of `name`'s hierarchy.
    private static func root(of name: String, in stored: StoredSchema) -> String {
        var current = name
        var steps = 0
        while let parent = stored.entities[current]?.superentity, stored.entities[parent] != nil,
            steps <= stored.entities.count
        {
            current = parent
            steps += 1
        }
        return current
    }

    /// A to-one property: entity name and field.
    private struct Pointer: Hashable {
        let entity: String
        let field: Int
        init(_ entity: String, _ field: Int) {
            self.entity = entity
            self.field = field
        }
    }

    /// The row id in to-one `field` of a record read without its model
    /// type, nil when absent or nil.
    private static func toOneRow(_ bytes: [UInt8], field: Int, row: Int64) throws -> Int64? {
        try _RecordReader.withReader(bytes, entity: placeholder, row: row) { try $0.toOneRow(field: field) }
    }

    /// Each stored to-one whose inverse is a to-one, with that inverse,
    /// worked out from the stored schema as the model layer works it out
    /// from the types: the inverse a side names, else the relationship of
    /// the destination naming this one, else the only relationship each
    /// way between the two entities when neither names an inverse (never
    /// a relationship of an entity to itself as its own inverse).
    private static func oneToOneInverses(_ stored: StoredSchema) -> [Pointer: Pointer] {
        func destination(_ property: StoredEntity.Property) -> String {
            StoredEntity.baseType(property.type, array: true)
        }
        func namedInverse(_ property: StoredEntity.Property) -> String? {
            property.detail.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .first { $0.hasPrefix("inverse ") }.map { String($0.dropFirst(8)) }
        }
        func relationships(_ entity: StoredEntity) -> [StoredEntity.Property] {
            entity.properties.filter { $0.kind == "to-one" || $0.kind == "to-many" }
        }
        var result: [Pointer: Pointer] = [:]
        for (name, entity) in stored.entities {
            for property in entity.properties where property.kind == "to-one" {
                let target = destination(property)
                guard let other = stored.entities[target] else { continue }
                var inverse: StoredEntity.Property?
                if let named = namedInverse(property) {
                    inverse = other.property(named: named)
                } else if let naming = relationships(other).first(where: {
                    destination($0) == name && namedInverse($0) == property.name
                }) {
                    inverse = naming
                } else {
                    let mine = relationships(entity).filter { destination($0) == target && namedInverse($0) == nil }
                    let theirs = relationships(other).filter { destination($0) == name && namedInverse($0) == nil }
                    let itself = target == name && theirs.first?.field == property.field
                    if mine.count == 1, theirs.count == 1, !itself { inverse = theirs[0] }
                }
                if let inverse, inverse.kind == "to-one" {
                    result[Pointer(name, property.field)] = Pointer(target, inverse.field)
                }
            }
        }
        return result
    }

    /// The trees derived from an entity's records, checked by count (each
    /// unique constraint and index holds one entry per row, each reverse
    /// index one per non-nil to-one, a join as many pairs as its mirror)
    /// and each unique entry's row by existence.
    private static func checkDerived(
        name: String, entity: StoredEntity, rows: Int, toOnes: [Int: Int], tx: ReadTransaction,
        inHierarchy: Bool, shared: inout [String: (count: Int, what: String)]
    ) throws -> [String] {
        var problems: [String] = []
        let records = try tx.tree(Store.treeName(entityName: name))
        func expect(_ treeName: String, _ expected: Int, _ what: String) throws -> Tree? {
            guard let tree = try tx.treeIfPresent(treeName) else {
                problems.append("\(treeName): missing (\(what) of \(name))")
                return nil
            }
            let count = try tx.count(tree)
            if count != expected {
                problems.append("\(treeName): \(count) entries, expected \(expected) (\(what) of \(name))")
            }
            return tree
        }
        for key in entity.keys {
            if key.hasPrefix("unique ") {
                let uniqueTree = TreeName.keyGroup(.unique, entity: name, names: key.dropFirst(7).split(separator: "+"))
                guard let tree = try expect(uniqueTree, rows, "one per row") else { continue }
                try tx.forEach(tree) { _, value in
                    let row = value.withUnsafeBytes { KeyGroup.row(inUniqueValue: $0) }
                    let exists = try row.map { try tx.contains(RowKey.encode($0), in: records) } ?? false
                    if !exists {
                        problems.append("\(uniqueTree): an entry points at no stored row")
                        return false
                    }
                    return true
                }
            } else if key.hasPrefix("index ") {
                _ = try expect(
                    TreeName.keyGroup(.index, entity: name, names: key.dropFirst(6).split(separator: "+")), rows, "one per row")
            } else if let storage = StoredStorage(key) {
                switch storage.kind {
                case .toOne:
                    let field = entity.property(named: storage.property)?.field ?? -1
                    let what = "one per non-nil \(storage.property)"
                    if inHierarchy {
                        // Shared by a hierarchy: counted once every class is read.
                        shared[storage.tree, default: (0, what)].count += toOnes[field] ?? 0
                    } else {
                        _ = try expect(storage.tree, toOnes[field] ?? 0, what)
                    }
                case .join:
                    let mirror = StoredStorage.mirror(ofJoin: storage.tree)
                    if let join = try tx.treeIfPresent(storage.tree) {
                        _ = try expect(mirror, try tx.count(join), "the mirror of \(storage.tree)")
                    } else {
                        problems.append("\(storage.tree): missing (\(storage.property) of \(name))")
                    }
                case .viaInverse, .mirror, .external: break
                }
            }
        }
        return problems
    }

    /// The wire types a stored type string may use (nil: any, for types
    /// the tool cannot tell from their name).
    private static func wires(_ type: String) -> Set<UInt8>? {
        switch StoredEntity.baseType(type) {
        case "Bool", "Int", "Int8", "Int16", "Int32", "Int64", "UInt", "UInt8", "UInt16", "UInt32", "UInt64":
            return [RecordFormat.varint]
        case "Double", "Date": return [RecordFormat.fixed64]
        case "Float": return [RecordFormat.fixed32]
        case "String", "Data", "UUID", "URL", "Decimal": return [RecordFormat.lengthDelimited]
        default: return nil
        }
    }

    private static func checkFields(
        _ bytes: [UInt8], row: Int64, entity: StoredEntity, name: String, targets: [Int: [Int64: Tree]],
        tx: ReadTransaction,
        toOnes: inout [Int: Int]
    ) throws -> [String] {
        var problems: [String] = []
        try bytes.withUnsafeBytes { raw in
            var reader = try _RecordReader(borrowing: raw, entity: placeholder, row: row)
            for field in try reader.fields() {
                guard field.field < entity.properties.count else {
                    // A field a migration removed without rewriting records.
                    if field.field < entity.recordFields ?? 0 { continue }
                    problems.append("\(TreeName.records(name)) row \(row): field \(field.field) is not a property of \(name)")
                    continue
                }
                let property = entity.properties[field.field]
                if field.slot.wire == RecordFormat.null {
                    if !property.type.hasPrefix("Optional<") && entity.fills[property.name] == nil {
                        problems.append(
                            "\(TreeName.records(name)) row \(row): \(property.name) is nil but \(property.type) "
                                + "is not optional")
                    }
                    continue
                }
                if property.kind == "to-one" {
                    toOnes[field.field, default: 0] += 1
                    guard let trees = targets[field.field] else { continue }
                    let value = try reader.payloadVarint(field.slot, field: field.field)
                    let target = Int64(bitPattern: value)
                    let tree = trees.count == 1 ? trees.first?.value : trees[target >> Schema.Entity.rowTagShift]
                    if try tree.map({ try !tx.contains(RowKey.encode(target), in: $0) }) ?? true {
                        problems.append("\(TreeName.records(name)) row \(row): \(property.name) points at missing row \(value)")
                    }
                } else if let allowed = wires(property.type), !allowed.contains(field.slot.wire) {
                    problems.append(
                        "\(TreeName.records(name)) row \(row): \(property.name) has wire type \(field.slot.wire), which \(property.type) does not use"
                    )
                }
            }
        }
        return problems
    }
}

/// A model without properties, whose entity stands in for stored entities
/// the tool reads without their model types.
@Model final class _InspectedRecord {
    init() {}
}
