import Synchronization

/// The container's store: the engine database, one tree per entity, and
/// the stored schema.
///
/// Layout in the engine (DESIGN.md, "Object mapping"):
/// - tree `strata.schema`: entity name → the entity's stored description;
/// - tree `e.<Entity>`: row id (8 bytes, big-endian) → record;
/// - trees `u.<Entity>.<a>+<b>` and `i.<Entity>.<a>+<b>`: unique
///   constraints and indexes (see ``KeyGroup``);
/// - trees `r.`, `j.` and `m.<Entity>.<field>`: relationships (see
///   ``RelationshipStorage``).
///
/// Row ids are allocated from a counter per entity, initialized from the
/// entity tree's last key at open. They are handed out at `insert`, so an
/// identifier is permanent from the moment a model is inserted — unless
/// the save upserts it into a stored row with the same unique values, when
/// it takes that row's identifier. Ids of inserts that are rolled back or
/// upserted are not reused.
final class Store: @unchecked Sendable {
    let database: Database
    let identifier: String
    let allowsSave: Bool
    let schema: Schema
    private let nextRows: Mutex<[String: Int64]>

    static let schemaTree = "strata.schema"

    static func treeName(_ entity: Schema.Entity) -> String { entity.recordTree }

    /// The tree of the entity named `entityName` (a model class's name).
    static func treeName(entityName: String) -> String { "e." + entityName }

    init(configuration: ModelConfiguration, schema: Schema) throws {
        self.schema = schema
        self.allowsSave = configuration.allowsSave
        var options = DatabaseOptions()
        options.readOnly = !configuration.allowsSave && !configuration.isStoredInMemoryOnly
        if configuration.isStoredInMemoryOnly {
            database = try Database.open(path: "memory.store", options: options, fileSystem: MemoryFileSystem())
            identifier = "memory-" + UUID().uuidString
        } else {
            let path = configuration.url.path
            if !options.readOnly {
                try? FileManager.default.createDirectory(
                    at: configuration.url.deletingLastPathComponent(), withIntermediateDirectories: true)
            }
            database = try Database.open(path: path, options: options)
            identifier = path
        }
        do {
            nextRows = Mutex(try Self.prepare(database, schema: schema, writable: !options.readOnly))
        } catch {
            try? database.close()
            throw error
        }
    }

    /// Checks the stored schema against `schema`, creates the trees of new
    /// entities, and reads each entity's last row id.
    private static func prepare(_ database: Database, schema: Schema, writable: Bool) throws -> [String: Int64] {
        let stored: [String: [UInt8]] = try database.read { tx in
            guard let tree = try tx.treeIfPresent(schemaTree) else { return [:] }
            var result: [String: [UInt8]] = [:]
            try tx.forEach(tree) { key, value in
                result[String(decoding: key, as: UTF8.self)] = value
                return true
            }
            return result
        }
        var problems: [String] = []
        var missing: [Schema.Entity] = []
        for entity in schema.entities {
            let description = StoredEntity(entity).encoded
            if let old = stored[entity.name] {
                if old != description {
                    let before = (try? StoredEntity(decoding: old))?.summary ?? "an undecodable description"
                    problems.append("\(entity.name): stored as \(before), the model has \(StoredEntity(entity).summary)")
                }
            } else {
                missing.append(entity)
            }
        }
        if !problems.isEmpty {
            throw SwiftDataError(
                .schemaMismatch,
                "the store was written with a different schema and no migration applies: " + problems.joined(separator: "; "))
        }
        if !missing.isEmpty {
            guard writable else {
                let names = missing.map(\.name).joined(separator: ", ")
                throw SwiftDataError(.schemaMismatch, "the read-only store has no entity \(names)")
            }
            try database.write { tx in
                let tree = try tx.treeIfPresent(schemaTree) ?? tx.createTree(schemaTree)
                for entity in missing {
                    try tx.put(Array(entity.name.utf8), StoredEntity(entity).encoded, in: tree)
                    for name in [treeName(entity)] + entity.keyGroups.map(\.treeName) + entity.relationshipTrees
                        + entity.externalTrees.values.sorted()
                    where try tx.treeIfPresent(name) == nil {
                        try tx.createTree(name)
                    }
                }
            }
        }
        return try database.read { tx in
            var rows: [String: Int64] = [:]
            for entity in schema.entities {
                var last: Int64 = 0
                if let tree = try tx.treeIfPresent(treeName(entity)) {
                    let cursor = try tx.cursor(tree)
                    if try cursor.last() { last = try RowKey.decode(try cursor.key()) }
                }
                rows[entity.name] = last
            }
            return rows
        }
    }

    /// A new row id for `entity`.
    func allocateRow(_ entity: Schema.Entity) -> Int64 {
        nextRows.withLock { rows in
            let next = (rows[entity.name] ?? 0) + 1
            rows[entity.name] = next
            return next
        }
    }

    func close() { try? database.close() }
}

/// Row keys: the row id as 8 big-endian bytes, so key order is row order.
enum RowKey {
    static func encode(_ row: Int64) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 8) { buffer, count in
            UnsafeMutableRawBufferPointer(buffer).storeBytes(of: UInt64(bitPattern: row).bigEndian, as: UInt64.self)
            count = 8
        }
    }

    /// Appends the key of `row` to `batch`.
    static func append(_ row: Int64, to batch: inout KeyBatch) {
        batch.append(count: 8) { $0.storeBytes(of: UInt64(bitPattern: row).bigEndian, as: UInt64.self) }
    }

    static func decode(_ key: [UInt8]) throws -> Int64 {
        guard key.count == 8 else { throw SwiftDataError(.corruptRecord, "a row key of \(key.count) bytes") }
        var value: UInt64 = 0
        for byte in key { value = value << 8 | UInt64(byte) }
        return Int64(bitPattern: value)
    }

    static func decode(_ key: UnsafeRawBufferPointer) throws -> Int64 {
        guard key.count == 8 else { throw SwiftDataError(.corruptRecord, "a row key of \(key.count) bytes") }
        var value: UInt64 = 0
        for byte in key { value = value << 8 | UInt64(byte) }
        return Int64(bitPattern: value)
    }
}

/// What the store remembers of an entity: each property's name, field
/// number, kind and type. Stored as readable text, one property per line
/// (`field name kind type`), so a mismatch can be reported exactly.
struct StoredEntity: Equatable {
    struct Property: Equatable {
        var field: Int
        var name: String
        var kind: String
        var type: String
    }

    var properties: [Property]
    /// The unique constraints and indexes, as `unique a+b` / `index a`.
    var keys: [String]

    init(_ entity: Schema.Entity) {
        keys =
            entity.keyGroups.map { "\($0.kind.rawValue) " + $0.properties.map(\.name).joined(separator: "+") }
            + entity.relationships.compactMap { relationship in
                entity.relationshipStorage[relationship.field].map { "storage \(relationship.name) \($0)" }
            }
            + entity.externalTrees.sorted { $0.key < $1.key }.map { "storage \(entity.properties[$0.key].name) in \($0.value)" }
        properties = entity.properties.map { property in
            let kind: String
            if let relationship = property as? Schema.Relationship {
                kind = relationship.isToOneRelationship ? "to-one" : "to-many"
            } else {
                kind = "attribute"
            }
            return Property(field: property.field, name: property.name, kind: kind, type: "\(property.valueType)")
        }
    }

    init(decoding bytes: [UInt8]) throws {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw SwiftDataError(.corruptRecord, "the stored schema is not UTF-8")
        }
        properties = []
        keys = []
        for line in text.split(separator: "\n") {
            if line.hasPrefix("unique ") || line.hasPrefix("index ") || line.hasPrefix("storage ") {
                keys.append(String(line))
                continue
            }
            let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
            guard parts.count == 4, let field = Int(parts[0]) else {
                throw SwiftDataError(.corruptRecord, "undecodable stored schema line: \(line)")
            }
            properties.append(Property(field: field, name: parts[1], kind: parts[2], type: parts[3]))
        }
    }

    var encoded: [UInt8] {
        let lines = properties.map { "\($0.field) \($0.name) \($0.kind) \($0.type)" } + keys
        return Array(lines.joined(separator: "\n").utf8)
    }

    var summary: String {
        "(" + (properties.map { "\($0.name): \($0.type)" } + keys).joined(separator: ", ") + ")"
    }
}
