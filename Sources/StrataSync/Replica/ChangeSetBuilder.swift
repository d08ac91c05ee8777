import Foundation
import Strata
import StrataEngine

extension SyncReplica {
    /// Builds one save's change set from the store's current records.
    struct ChangeSetBuilder {
        let schema: Schema
        let tx: WriteTransaction
        var set = SyncChangeSet()
        /// The models the save being built inserted, as "Entity/row".
        var insertedHere: Set<String> = []
        /// Every model is new to the zone (the upload at joining).
        var uploadAll = false
        /// When the store joins its zone again: the models sent so far, as
        /// "Entity/row" (each goes once, before any model that refers to it,
        /// as an insert under the identifier it has).
        var sent: Set<String>?

        /// A delete of a model the zone knows (one it never knew is left out),
        /// and of the pulled models merged into it ahead of the zone: in the
        /// zone's order they are still apart, and here they went with it.
        mutating func delete(_ entity: Schema.Entity, row: Int64) throws {
            for id in try SyncReplica.endAheadMerges(into: entity, row: row, tx) {
                set.changes.append(SyncChangeSet.Change(kind: .delete, entity: entity.name, id: id))
                try SyncReplica.markDeleted(id, entity: entity.name, row: nil, tx)
            }
            guard let id = try SyncReplica.id(of: entity.name, row: row, tx) else { return }
            set.changes.append(SyncChangeSet.Change(kind: .delete, entity: entity.name, id: id))
            try SyncReplica.markDeleted(id, entity: entity.name, row: row, tx)
        }

        /// The model's attributes and relationships (`only` those named,
        /// when given) as they are stored now. A model new to the zone gets
        /// its identifier and is sent whole; one deleted since is left out
        /// (its delete follows).
        mutating func upsert(_ entity: Schema.Entity, row: Int64, only: Set<String>?) throws {
            guard let tree = try tx.treeIfPresent(entity.recordTree), let record = try tx.get(RowKey.encode(row), in: tree)
            else {
                // Gone since. A delete of this device's saves comes later
                // and is sent then; a model that a delete rule took while
                // this device applied the zone's changes (because of this
                // save, not pushed yet) is deleted nowhere else: send the
                // delete now.
                try delete(entity, row: row)
                return
            }
            var only = only
            var kind = SyncChangeSet.Kind.update
            let id: SyncID
            if sent != nil { sent?.insert("\(entity.name)/\(row)") }
            if let known = try SyncReplica.id(of: entity.name, row: row, tx) {
                id = known
                if sent != nil {
                    kind = .insert
                    only = nil
                }
            } else {
                id = SyncID.make()
                try SyncReplica.map(id, entity: entity.name, row: row, tx)
                kind = .insert
                only = nil
            }
            let index = set.changes.count
            set.changes.append(SyncChangeSet.Change(kind: kind, entity: entity.name, id: id))
            let fields = try self.fields(of: record, entity: entity, row: row, only: only)
            if kind == .update && fields.isEmpty {
                set.changes.remove(at: index)
                return
            }
            set.changes[index].fields = fields
        }

        /// The attributes and relationships sync carries, `only` those named
        /// when given, as the record and the relationship trees hold them;
        /// an attribute the record lacks is sent as its default.
        mutating func fields(of record: [UInt8], entity: Schema.Entity, row: Int64, only: Set<String>?) throws
            -> [SyncChangeSet.Field]
        {
            let stored = try SyncReplica.attributes(of: record, entity: entity, row: row, only: only)
            var result = stored.fields
            let toOnes = stored.toOnes
            for (property, target) in toOnes {
                guard let relationship = property as? Schema.Relationship else { continue }
                var value: [UInt8] = []
                if let target {
                    // A target of a later save: that save sends this field.
                    guard let id = try reference(relationship, row: target) else { continue }
                    value = id.bytes
                }
                result.append(SyncChangeSet.Field(name: property.name, wire: SyncChangeSet.toOne, value: value))
            }
            for (field, tree) in entity.externalTrees.sorted(by: { $0.key < $1.key }) {
                let property = entity.properties[field]
                guard only?.contains(property.name) ?? true else { continue }
                result.append(try SyncReplica.externalField(property, tree: tree, entity: entity, row: row, tx))
            }
            for property in entity.properties where only?.contains(property.name) ?? true {
                guard let relationship = property as? Schema.Relationship else { continue }
                let tree: String
                switch entity.relationshipStorage[property.field] {
                case .join(let join, _)?: tree = join
                case .mirror(_, let mirror)?: tree = mirror
                default: continue  // a to-one, or a to-many its inverse to-one holds
                }
                let rows = try tx.treeIfPresent(tree).map { try PairKey.rows(in: $0, of: row, tx: tx) } ?? []
                var value: [UInt8] = []
                for target in rows { value += try reference(relationship, row: target)?.bytes ?? [] }
                result.append(SyncChangeSet.Field(name: property.name, wire: SyncChangeSet.toMany, value: value))
            }
            return result
        }

        /// The identifier of `relationship`'s target `row`. A target this
        /// save inserted gets its identifier now (its insert is in this
        /// change set). A target the zone does not know that a later save
        /// inserted is nil: the relationship changed after this save, and
        /// the save that changed it sends it (sending it here would put the
        /// target's insert before this device's saves between the two).
        mutating func reference(_ relationship: Schema.Relationship, row: Int64) throws -> SyncID? {
            guard let type = relationship.destinationType, let target = schema.entity(forType: type) else {
                throw SwiftDataError(.unknownModelType, "relationship \(relationship.name): no entity for its target")
            }
            if let known = try SyncReplica.id(of: target.name, row: row, tx) {
                if let sent, !sent.contains("\(target.name)/\(row)") { try upsert(target, row: row, only: nil) }
                return known
            }
            guard uploadAll || insertedHere.contains("\(target.name)/\(row)") else { return nil }
            try upsert(target, row: row, only: nil)
            return try SyncReplica.id(of: target.name, row: row, tx)
        }
    }

    /// The attributes sync carries of `record` (`only` those named, when
    /// given; one the record lacks as its default), and the rows its
    /// to-ones (`only` those named) point at.
    static func attributes(of record: [UInt8], entity: Schema.Entity, row: Int64, only: Set<String>?) throws
        -> (fields: [SyncChangeSet.Field], toOnes: [(Schema.Property, Int64?)])
    {
        var result: [SyncChangeSet.Field] = []
        var present = Set<Int>()
        var toOnes: [(Schema.Property, Int64?)] = []
        try record.withUnsafeBytes { raw in
            var reader = try _RecordReader(borrowing: raw, entity: entity, row: row)
            for field in try reader.fields() {
                guard field.field < entity.properties.count else { continue }
                let property = entity.properties[field.field]
                guard carries(property, entity), only?.contains(property.name) ?? true else { continue }
                present.insert(field.field)
                result.append(
                    SyncChangeSet.Field(
                        name: property.name, wire: field.slot.wire, value: Array(raw[field.valueStart..<field.slot.end])))
            }
            for property in entity.properties
            where property is Schema.Relationship && (only?.contains(property.name) ?? true) {
                if case .toOne? = entity.relationshipStorage[property.field] {
                    toOnes.append((property, try reader.toOneRow(field: property.field)))
                }
            }
        }
        for property in entity.properties
        where !present.contains(property.field) && carries(property, entity) && (only?.contains(property.name) ?? true) {
            if let (wire, value) = try _RecordReader.defaultEncoding(of: property.field, entity: entity, row: row) {
                result.append(SyncChangeSet.Field(name: property.name, wire: wire, value: value))
            } else {
                result.append(SyncChangeSet.Field(name: property.name, wire: RecordFormat.null, value: []))
            }
        }
        return (result, toOnes)
    }

    /// Whether sync carries `property` as an attribute in the record: every
    /// stored attribute but `.externalStorage` data, which goes as a
    /// reference (``ExternalReference``).
    static func carries(_ property: Schema.Property, _ entity: Schema.Entity) -> Bool {
        property is Schema.Attribute && entity.externalTrees[property.field] == nil
    }
}
