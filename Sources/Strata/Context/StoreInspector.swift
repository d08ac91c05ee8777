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
            lines.append("entity \(name)")
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
    /// each to-one points at a stored row. `progress` gets (rows done,
    /// rows in all). Problems are capped at `limit`.
    package static func checkRecords(
        _ tx: ReadTransaction, limit: Int = 1000, progress: (Int, Int) -> Void = { _, _ in }
    ) throws -> [String] {
        let stored = try StoredSchema(tx)
        var problems: [String] = []
        let total = try rowCounts(tx).reduce(0) { $0 + $1.rows }
        var done = 0
        for (name, entity) in stored.entities.sorted(by: { $0.key < $1.key }) {
            guard let tree = try tx.treeIfPresent(Store.treeName(entityName: name)) else {
                problems.append("entity \(name): its record tree e.\(name) is missing")
                continue
            }
            var targets: [Int: Tree] = [:]
            for property in entity.properties where property.kind == "to-one" {
                let destination = destinationName(property.type)
                if let target = try tx.treeIfPresent(Store.treeName(entityName: destination)) {
                    targets[property.field] = target
                } else {
                    problems.append("\(name).\(property.name): the destination \(destination) has no record tree")
                }
            }
            let cursor = try tx.cursor(tree)
            var more = try cursor.first()
            while more, problems.count < limit {
                let (key, value) = (try cursor.key(), try cursor.value())
                more = try cursor.next()
                done += 1
                if done % 65536 == 0 { progress(done, total) }
                guard key.count == 8 else {
                    problems.append("e.\(name): a key of \(key.count) bytes is not a row id")
                    continue
                }
                let row = try RowKey.decode(key)
                do {
                    try problems += checkFields(value, row: row, entity: entity, name: name, targets: targets, tx: tx)
                } catch let error as SwiftDataError {
                    // The reader names the placeholder entity; name the real one.
                    let message = error.message.replacingOccurrences(of: "\(placeholder.name) row \(row)", with: "")
                    problems.append("e.\(name) row \(row)\(message)")
                }
            }
        }
        progress(done, total)
        return Array(problems.prefix(limit))
    }

    private static func destinationName(_ type: String) -> String {
        for wrapper in ["Optional<", "Array<"] where type.hasPrefix(wrapper) && type.hasSuffix(">") {
            return String(type.dropFirst(wrapper.count).dropLast())
        }
        return type
    }

    /// The wire types a stored type string may use (nil: any, for types
    /// the tool cannot tell from their name).
    private static func wires(_ type: String) -> Set<UInt8>? {
        let base = destinationName(type)
        switch base {
        case "Bool", "Int", "Int8", "Int16", "Int32", "Int64", "UInt", "UInt8", "UInt16", "UInt32", "UInt64":
            return [RecordFormat.varint]
        case "Double", "Date": return [RecordFormat.fixed64]
        case "Float": return [RecordFormat.fixed32]
        case "String", "Data", "UUID", "URL", "Decimal": return [RecordFormat.lengthDelimited]
        default: return nil
        }
    }

    private static func checkFields(
        _ bytes: [UInt8], row: Int64, entity: StoredEntity, name: String, targets: [Int: Tree], tx: ReadTransaction
    ) throws -> [String] {
        var problems: [String] = []
        let fields: [(field: Int, slot: _RecordReader.Slot, valueStart: Int)] = try bytes.withUnsafeBytes { raw in
            var reader = try _RecordReader(borrowing: raw, entity: placeholder, row: row)
            return try reader.fields()
        }
        for field in fields {
            guard field.field < entity.properties.count else {
                problems.append("e.\(name) row \(row): field \(field.field) is not a property of \(name)")
                continue
            }
            let property = entity.properties[field.field]
            if field.slot.wire == RecordFormat.null {
                if !property.type.hasPrefix("Optional<") {
                    problems.append("e.\(name) row \(row): \(property.name) is nil but \(property.type) is not optional")
                }
                continue
            }
            if property.kind == "to-one" {
                guard field.slot.wire == RecordFormat.varint, let target = targets[field.field] else { continue }
                var index = field.slot.start
                var value: UInt64 = 0
                var shift: UInt64 = 0
                while index < field.slot.end {
                    value |= UInt64(bytes[index] & 0x7F) << shift
                    shift += 7
                    index += 1
                }
                if try !tx.contains(RowKey.encode(Int64(bitPattern: value)), in: target) {
                    problems.append("e.\(name) row \(row): \(property.name) points at missing row \(value)")
                }
            } else if let allowed = wires(property.type), !allowed.contains(field.slot.wire) {
                problems.append(
                    "e.\(name) row \(row): \(property.name) has wire type \(field.slot.wire), which \(property.type) does not use"
                )
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
