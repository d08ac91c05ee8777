import Foundation
import StrataEngine

/// What one save changed, gathered by ``SaveTransaction`` and written by
/// ``HistoryLog/append(_:author:tx:)`` in the save's own write transaction
/// (so history and data commit together or not at all).
package struct HistoryRecorder {
    package enum Kind: UInt8 {
        case insert = 0
        case update = 1
        case delete = 2
    }

    /// The changes of one kind to one entity.
    struct Group {
        let kind: Kind
        let entity: String
        /// Attribute names that updates and tombstones refer to by index.
        var names: [String] = []
        var nameIndex: [String: Int] = [:]
        var rows: [Int64] = []
        /// The indexes of the updated attributes' names, update after
        /// update, and where each update's run ends: two arrays for a
        /// save, not one per updated row (see ``attributes(ofUpdate:)``).
        var attributeIndexes: [Int] = []
        var attributeEnds: [Int] = []
        /// Per delete: the preserved values, as a record whose field
        /// numbers are name indexes.
        var tombstones: [[UInt8]] = []

        /// By the entity's field number: the name's index plus one, 0
        /// for a name not listed yet (a group is of one entity).
        var fieldIndex: [Int] = []

        /// The indexes of the attribute names update `update` changed.
        func attributes(ofUpdate update: Int) -> ArraySlice<Int> {
            attributeIndexes[(update == 0 ? 0 : attributeEnds[update - 1])..<attributeEnds[update]]
        }

        mutating func index(of name: String) -> Int {
            if let known = nameIndex[name] { return known }
            names.append(name)
            nameIndex[name] = names.count - 1
            return names.count - 1
        }

        /// ``index(of:)`` of field `field`'s name, without hashing the name
        /// for each update of a save that changes thousands of rows.
        mutating func index(ofField field: Int, in entity: Schema.Entity) -> Int {
            if fieldIndex.isEmpty { fieldIndex = Array(repeating: 0, count: entity.properties.count) }
            if fieldIndex[field] == 0 { fieldIndex[field] = index(of: entity.properties[field].name) + 1 }
            return fieldIndex[field] - 1
        }
    }

    private(set) var groups: [Group] = []
    /// Group by kind and entity. Entities are compared by identity (one
    /// schema per save), so no name is built or hashed per change.
    private var groupIndex: [GroupKey: Int] = [:]
    /// The last group asked for: a save's changes come in runs of one kind
    /// and entity (a cascade deletes thousands of rows of one entity).
    private var lastGroup: (key: GroupKey, index: Int)?

    private struct GroupKey: Hashable {
        let kind: Kind
        let entity: ObjectIdentifier
    }

    var isEmpty: Bool { groups.isEmpty }

    private mutating func group(_ kind: Kind, _ entity: Schema.Entity) -> Int {
        let key = GroupKey(kind: kind, entity: ObjectIdentifier(entity))
        if let lastGroup, lastGroup.key == key { return lastGroup.index }
        let index: Int
        if let known = groupIndex[key] {
            index = known
        } else {
            groups.append(Group(kind: kind, entity: entity.name))
            index = groups.count - 1
            groupIndex[key] = index
        }
        lastGroup = (key, index)
        return index
    }

    mutating func insert(_ entity: Schema.Entity, row: Int64) {
        groups[group(.insert, entity)].rows.append(row)
    }

    /// An update of `row`; `fields` are the properties whose stored
    /// values changed.
    mutating func update(_ entity: Schema.Entity, row: Int64, fields: _FieldSet) {
        let index = group(.update, entity)
        groups[index].rows.append(row)
        fields.forEachField { groups[index].attributeIndexes.append(groups[index].index(ofField: $0, in: entity)) }
        groups[index].attributeEnds.append(groups[index].attributeIndexes.count)
    }

    /// A delete of `row`, whose record (when the entity preserves values on
    /// deletion) gives the tombstone.
    mutating func delete(_ entity: Schema.Entity, row: Int64, record: [UInt8]?) throws {
        let index = group(.delete, entity)
        groups[index].rows.append(row)
        var tombstone: [UInt8] = []
        if let record, !entity.preservedFields.isEmpty {
            var writer = _RecordWriter()
            try record.withUnsafeBytes { raw in
                var reader = try _RecordReader(borrowing: raw, entity: entity, row: row)
                var copies: [(Int, UInt8, Range<Int>)] = []
                for field in try reader.fields() where entity.preservedFields.contains(field.field) {
                    copies.append(
                        (
                            groups[index].index(ofField: field.field, in: entity), field.slot.wire,
                            field.valueStart..<field.slot.end
                        ))
                }
                for (nameIndex, wire, range) in copies.sorted(by: { $0.0 < $1.0 }) {
                    writer.appendCopy(field: nameIndex, wire: wire, value: UnsafeRawBufferPointer(rebasing: raw[range]))
                }
            }
            tombstone = writer.bytes
        }
        groups[index].tombstones.append(tombstone)
    }
}
