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
    var problems: [String] = []
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

    static func isRecordHeld(_ property: StoredEntity.Property, in old: StoredEntity) -> Bool {
        switch property.kind {
        case "attribute": return old.storage(of: property.name)?.kind != .external
        case "to-one": return true
        default: return false
        }
    }

    static func isRecordHeld(_ property: Schema.Property, in entity: Schema.Entity) -> Bool {
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
}

extension _RecordPrimitive {
    static var hasPlaceholder: Bool { _placeholder != nil }
}
