import StrataEngine

/// What the store remembers of an entity, in the catalog tree
/// `strata.schema` under the entity's name: each property's field number
/// (its tag in records), stable id, name, kind, type and details, and the
/// trees the entity owns. Migration compares it with the model's entity.
///
/// Stored as readable text (format 2), so a mismatch can be reported
/// exactly and a damaged catalog read by eye:
///
/// ```
/// strata-entity 2
/// p <field> <id> <name> <kind> <type> <detail>     (tab-separated)
/// k <unique a+b | index a | storage …>
/// ```
///
/// The stable id survives renames (`originalName`) and reordering: a new
/// store numbers properties 1, 2, …; a migration keeps the ids of mapped
/// properties and gives added ones the next free ids. Field numbers follow
/// declaration order, which the `@Model` expansion compiles in, so a
/// migration that moves a property rewrites its records.
///
/// Format 1 (lines `field name kind type`, no header) is still read; its
/// ids are `field + 1`.
struct StoredEntity: Equatable {
    struct Property: Equatable {
        var field: Int
        var id: Int
        var name: String
        /// `attribute`, `to-one` or `to-many`.
        var kind: String
        var type: String
        /// Options, hash modifier, destination and delete rule; part of
        /// the version hash, not of storage decisions.
        var detail: String
    }

    var properties: [Property]
    /// The unique constraints, indexes and relationship/external storage,
    /// as `unique a+b`, `index a`, `storage …`, and for the entity of a
    /// subclass its superentity, as `super Name`.
    var keys: [String]

    /// The superentity the `super` line names.
    var superentity: String? {
        keys.first { $0.hasPrefix("super ") }.map { String($0.dropFirst(6)) }
    }
    /// Field numbers that may appear in records are below this: more than
    /// the properties when a migration removed trailing fields without
    /// rewriting records (line `r <n>`; nil: the property count). A
    /// migration that would give one of these numbers to a new field
    /// rewrites the records first.
    var recordFields: Int?
    /// Attributes a migration added with a default value (or made
    /// non-optional) without writing it into records, by property name: the
    /// one-field record of the default each record without a value reads
    /// as (lines `f <name> <hex>`). Readers take the model's declared
    /// default (``Schema/Entity/defaultRecords``); a migration that finds
    /// it no longer equal to this rewrites the records with this one.
    var fills: [String: [UInt8]] = [:]

    /// The stored description of `entity`, with ids `field + 1` or, for
    /// properties a migration mapped, the ids it assigned.
    init(_ entity: Schema.Entity, ids: [Int: Int] = [:]) {
        keys =
            entity.keyGroups.map { "\($0.kind.rawValue) " + $0.properties.map(\.name).joined(separator: "+") }
            + entity.relationships.compactMap { relationship in
                entity.relationshipStorage[relationship.field].map { "storage \(relationship.name) \($0)" }
            }
            + entity.externalTrees.sorted { $0.key < $1.key }.map { "storage \(entity.properties[$0.key].name) in \($0.value)" }
            + (entity.superentity.map { ["super \($0.name)"] } ?? [])
        properties = entity.properties.map { property in
            Property(
                field: property.field, id: ids[property.field] ?? property.field + 1, name: property.name,
                kind: Self.kind(of: property), type: "\(property.valueType)", detail: Self.detail(of: property))
        }
    }

    static func kind(of property: Schema.Property) -> String {
        guard let relationship = property as? Schema.Relationship else { return "attribute" }
        return relationship.isToOneRelationship ? "to-one" : "to-many"
    }

    /// What of a property's declaration beyond its type counts for the
    /// version hash: options, `hashModifier`, and a relationship's
    /// destination, delete rule and count bounds. `originalName` does not
    /// count (as in SwiftData and Core Data, a rename hint is not a change).
    static func detail(of property: Schema.Property) -> String {
        var parts: [String] = []
        if let attribute = property as? Schema.Attribute {
            parts += attribute.options.map { "\($0)" }.sorted()
        } else if let relationship = property as? Schema.Relationship {
            parts.append("-> \(relationship.destination)")
            parts.append("delete \(relationship.deleteRule.rawValue)")
            // By name: a key path's description can hold addresses that
            // change from run to run.
            if let inverse = relationship.inverseKeyPath {
                let name = relationship.destinationType?.schemaMetadata.first { $0.keypath == inverse }?.name
                parts.append("inverse \(name ?? "?")")
            }
            if let minimum = relationship.minimumModelCount, minimum > 0 { parts.append("min \(minimum)") }
            if let maximum = relationship.maximumModelCount, maximum > 0 { parts.append("max \(maximum)") }
            parts += relationship.options.map { "\($0)" }.sorted()
        }
        if let modifier = property.hashModifier { parts.append("hash \(modifier)") }
        return parts.joined(separator: ", ")
    }

    init(decoding bytes: [UInt8]) throws {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw SwiftDataError(.corruptRecord, "the stored schema is not UTF-8")
        }
        properties = []
        keys = []
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true)[...]
        let current = lines.first == "strata-entity 2"
        if current { lines = lines.dropFirst() }
        for line in lines {
            if current {
                let parts = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
                if parts.first == "k", parts.count == 2 {
                    keys.append(parts[1])
                    continue
                }
                if parts.first == "r", parts.count == 2, let limit = Int(parts[1]), limit >= 0 {
                    recordFields = limit
                    continue
                }
                if parts.first == "f", parts.count == 3, let record = Self.bytes(hex: parts[2]), record.count > 1 {
                    fills[parts[1]] = record
                    continue
                }
                guard parts.count == 7, parts[0] == "p", let field = Int(parts[1]), let id = Int(parts[2]) else {
                    throw SwiftDataError(.corruptRecord, "undecodable stored schema line: \(line)")
                }
                properties.append(
                    Property(field: field, id: id, name: parts[3], kind: parts[4], type: parts[5], detail: parts[6]))
                continue
            }
            if line.hasPrefix("unique ") || line.hasPrefix("index ") || line.hasPrefix("storage ") {
                keys.append(String(line))
                continue
            }
            let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
            guard parts.count == 4, let field = Int(parts[0]) else {
                throw SwiftDataError(.corruptRecord, "undecodable stored schema line: \(line)")
            }
            properties.append(
                Property(field: field, id: field + 1, name: parts[1], kind: parts[2], type: parts[3], detail: ""))
        }
        guard properties.map(\.field) == Array(properties.indices) else {
            throw SwiftDataError(.corruptRecord, "the stored schema's field numbers are not 0, 1, 2, …")
        }
    }

    var encoded: [UInt8] {
        var lines = ["strata-entity 2"]
        for p in properties {
            lines.append(["p", "\(p.field)", "\(p.id)", p.name, p.kind, p.type, p.detail].joined(separator: "\t"))
        }
        lines += keys.map { "k\t" + $0 }
        if let recordFields { lines.append("r\t\(recordFields)") }
        for (name, record) in fills.sorted(by: { $0.key < $1.key }) {
            lines.append("f\t\(name)\t" + Self.hex(record))
        }
        return Array(lines.joined(separator: "\n").utf8)
    }

    /// `bytes` as lowercase hex digits.
    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Bytes from lowercase or uppercase hex digits; nil for anything else.
    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var result: [UInt8] = []
        result.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = UInt8(String(UnicodeScalar(digits[index])), radix: 16),
                let low = UInt8(String(UnicodeScalar(digits[index + 1])), radix: 16)
            else { return nil }
            result.append(high << 4 | low)
        }
        return result
    }

    /// The part of the description that the version hash covers: no ids,
    /// record field limit or fills (they depend on the store's history,
    /// not on the model).
    var hashedText: String {
        (properties.map { "\($0.field) \($0.name) \($0.kind) \($0.type) [\($0.detail)]" } + keys).joined(separator: "\n")
    }

    /// A stored type without its `Optional<…>` (and, with `array`, its
    /// `Array<…>`, for a relationship's destination).
    static func baseType(_ type: String, array: Bool = false) -> String {
        for wrapper in array ? ["Optional<", "Array<"] : ["Optional<"] where type.hasPrefix(wrapper) && type.hasSuffix(">") {
            return String(type.dropFirst(wrapper.count).dropLast())
        }
        return type
    }

    func property(named name: String) -> Property? { properties.first { $0.name == name } }

    /// The trees the entity owns, from its `storage` lines and key lines.
    func ownedTrees(entity: String) -> Set<String> {
        var trees: Set<String> = [TreeName.records(entity)]
        for key in keys {
            if key.hasPrefix("unique ") {
                trees.insert(TreeName.keyGroup(.unique, entity: entity, names: key.dropFirst(7).split(separator: "+")))
            } else if key.hasPrefix("index ") {
                trees.insert(TreeName.keyGroup(.index, entity: entity, names: key.dropFirst(6).split(separator: "+")))
            } else if let storage = StoredStorage(key) {
                trees.formUnion(storage.ownedTrees)
            }
        }
        return trees
    }

    /// The storage line of the property named `name`.
    func storage(of name: String) -> StoredStorage? {
        keys.lazy.compactMap(StoredStorage.init).first { $0.property == name }
    }
}

/// A `storage` line of a stored entity, parsed: where a relationship or an
/// external attribute keeps its data (the texts of
/// ``RelationshipStorage/description``).
struct StoredStorage {
    var property: String
    /// The tree a to-many reads its targets from (own row first), or the
    /// to-one's reverse index, or the external attribute's tree.
    var tree: String
    var kind: Kind
    enum Kind { case toOne, viaInverse, join, mirror, external }

    var ownedTrees: [String] {
        switch kind {
        case .toOne, .external: return [tree]
        case .join: return [tree, Self.mirror(ofJoin: tree)]
        case .viaInverse, .mirror: return []
        }
    }

    /// The mirror of join tree `j.<Entity>.<field>`: `m.<Entity>.<field>`.
    static func mirror(ofJoin tree: String) -> String { TreeName.mirror(ofJoin: tree) }

    init?(_ line: String) {
        guard line.hasPrefix("storage ") else { return nil }
        let words = line.split(separator: " ").map(String.init)
        guard words.count >= 4 else { return nil }
        property = words[1]
        let rest = Array(words[2...])
        // The line comes from the store's catalog: a damaged one may be
        // cut short anywhere, so each form's words are counted first.
        switch rest.first {
        case "to-one": (kind, tree) = (.toOne, rest[rest.count - 1])
        case "joined" where rest.count >= 3: (kind, tree) = (.join, rest[2])
        case "in": (kind, tree) = (.external, rest[1])
        case "read" where rest.count > 3: (kind, tree) = (.mirror, rest[2].hasSuffix(",") ? String(rest[2].dropLast()) : rest[2])
        case "read" where rest.count == 3: (kind, tree) = (.viaInverse, rest[2])
        default: return nil
        }
    }
}

/// The catalog as a whole: every entity's description, the version hash
/// and the version identifier the store was last written with.
struct StoredSchema {
    var entities: [String: StoredEntity]
    /// The version hash (``StoredSchema/hash(of:)``); nil in stores written
    /// before hashes were recorded.
    var hash: String?
    var version: String?

    static let tree = TreeName.schema
    /// Catalog keys that are not entity names (an entity name is a Swift
    /// identifier, so it cannot start with `#`).
    static let hashKey = Array("#hash".utf8)
    static let versionKey = Array("#version".utf8)
    /// Every entity's ``StoredEntity/fills`` again, as lines
    /// `<entity> <property> <hex>`, so that the check at open reads them
    /// in one lookup; absent when no entity has any.
    static let fillsKey = Array("#fills".utf8)

    /// Reads the catalog; an empty schema when the store is new.
    init(_ tx: ReadTransaction) throws {
        entities = [:]
        guard let tree = try tx.treeIfPresent(Self.tree) else { return }
        var raw: [(String, [UInt8])] = []
        try tx.forEach(tree) { key, value in
            raw.append((String(decoding: key, as: UTF8.self), value))
            return true
        }
        for (name, value) in raw {
            switch name {
            case "#hash": hash = String(decoding: value, as: UTF8.self)
            case "#version": version = String(decoding: value, as: UTF8.self)
            case "#fills": break  // repeats the entities' fills
            case "#keys": break  // KeyFormat
            default: entities[name] = try StoredEntity(decoding: value)
            }
        }
    }

    /// The stored hash, read alone (the cheap check at open).
    static func storedHash(_ tx: ReadTransaction) throws -> String? {
        guard let tree = try tx.treeIfPresent(Self.tree) else { return nil }
        return try tx.get(hashKey, in: tree).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether the fills the catalog records are the defaults `schema`
    /// declares, read from `#fills` alone (the check at open, after the
    /// hash): a model whose declared default changed since a migration
    /// stored the old one needs its records to get the old one.
    static func fillsHold(_ tx: ReadTransaction, schema: Schema) throws -> Bool {
        guard let tree = try tx.treeIfPresent(Self.tree), let value = try tx.get(fillsKey, in: tree) else { return true }
        for line in String(decoding: value, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: "\t").map(String.init)
            guard parts.count == 3, let record = StoredEntity.bytes(hex: parts[2]),
                let entity = schema.entity(named: parts[0]),
                let property = entity.properties.first(where: { $0.name == parts[1] }),
                entity.defaultRecords[property.field] == record
            else { return false }
        }
        return true
    }

    /// The version hash of a set of entity descriptions: 64-bit FNV-1a over
    /// the hashed text of each entity, in name order. It identifies a
    /// schema version (it is how a plan's stored version is found); the
    /// full descriptions are stored beside it for the diff.
    static func hash(of entities: [String: StoredEntity]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for (name, entity) in entities.sorted(by: { $0.key < $1.key }) {
            for byte in (name + "\n" + entity.hashedText + "\n\n").utf8 {
                hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
            }
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The descriptions of `schema`'s entities (ids `field + 1`).
    static func describe(_ schema: Schema) -> [String: StoredEntity] {
        Dictionary(uniqueKeysWithValues: schema.entities.map { ($0.name, StoredEntity($0)) })
    }

    /// Writes `entities`, their hash and `version` into the catalog,
    /// replacing what was there.
    static func write(_ entities: [String: StoredEntity], version: Schema.Version, to tx: WriteTransaction) throws {
        let tree = try tx.treeIfPresent(Self.tree) ?? tx.createTree(Self.tree)
        try tx.clear(tree)
        for (name, entity) in entities { try tx.put(Array(name.utf8), entity.encoded, in: tree) }
        try tx.put(hashKey, Array(hash(of: entities).utf8), in: tree)
        try tx.put(versionKey, Array(version.description.utf8), in: tree)
        let fills = entities.sorted { $0.key < $1.key }.flatMap { name, entity in
            entity.fills.sorted { $0.key < $1.key }.map { property, record in
                "\(name)\t\(property)\t" + StoredEntity.hex(record)
            }
        }
        if !fills.isEmpty { try tx.put(fillsKey, Array(fills.joined(separator: "\n").utf8), in: tree) }
        try tx.put(KeyFormat.catalogKey, KeyFormat.current, in: tree)
    }
}
