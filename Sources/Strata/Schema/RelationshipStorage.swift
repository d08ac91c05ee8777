/// Where a relationship lives in the store (the "Object mapping" article, "Relationships").
///
/// - A to-one is the target's row id in the record, plus a reverse index
///   `r.<Entity>.<field>`: key = (target row, own row) → empty. The index
///   finds who refers to a row (for the inverse to-many, for delete rules,
///   for the check).
/// - A to-many whose inverse is a to-one is not stored at all: it is read
///   from that to-one's reverse index with the owner's row as prefix.
/// - Any other to-many (many-to-many, or no inverse) is a join tree
///   `j.<Entity>.<field>`: key = (own row, target row) → empty, with its
///   mirror `m.<Entity>.<field>`: key = (target row, own row). Of a
///   many-to-many pair, the side whose "entity.field" sorts first owns the
///   trees; the other side reads the mirror.
///
/// Keys are two ``KeyEncoding`` integer elements (``PairKey``), so a prefix
/// of one element selects every pair of one row.
package enum RelationshipStorage: Equatable, CustomStringConvertible {
    case toOne(index: String)
    case viaInverse(index: String)
    case join(tree: String, mirror: String)
    case mirror(of: String, tree: String)

    /// The tree a to-many reads its targets from, with its own row as prefix.
    var readTree: String? {
        switch self {
        case .toOne: return nil
        case .viaInverse(let index): return index
        case .join(let tree, _): return tree
        case .mirror(_, let tree): return tree
        }
    }

    /// The trees this relationship owns (created with its entity).
    var ownedTrees: [String] {
        switch self {
        case .toOne(let index): return [index]
        case .join(let tree, let mirror): return [tree, mirror]
        case .viaInverse, .mirror: return []
        }
    }

    package var description: String {
        switch self {
        case .toOne(let index): return "to-one indexed by \(index)"
        case .viaInverse(let index): return "read from \(index)"
        case .join(let tree, let mirror): return "joined in \(tree) and \(mirror)"
        case .mirror(let join, let tree): return "read from \(tree), the mirror of \(join)"
        }
    }

    /// The name of the model class, `type` or one of its superclasses,
    /// that declares property `field` of `type`.
    static func declaringName(of type: any PersistentModel.Type, field: Int) -> String {
        var declaring = type
        while let parent = _getSuperclass(declaring) as? any PersistentModel.Type, field < parent.schemaMetadata.count {
            declaring = parent
        }
        return declaring._strataEntityName
    }

    /// The storage of every relationship of `entity`, by field.
    static func plan(for entity: Schema.Entity) -> [Int: RelationshipStorage] {
        var plan: [Int: RelationshipStorage] = [:]
        for relationship in entity.relationships {
            let field = relationship.field
            // An inherited relationship lives in the trees of the class
            // that declares it, shared by the rows of its subclasses.
            let own = (entity: entity.declaringEntityNames[field], relationship: relationship.name)
            if relationship.isToOneRelationship {
                plan[field] = .toOne(index: TreeName.toOneIndex(entity: own.entity, relationship: own.relationship))
                continue
            }
            let ownJoin = RelationshipStorage.join(
                tree: TreeName.join(entity: own.entity, relationship: own.relationship),
                mirror: TreeName.mirror(entity: own.entity, relationship: own.relationship))
            guard let inverse = InverseGraph.inverse(of: entity.type, field: field) else {
                plan[field] = ownJoin
                continue
            }
            let other = (
                entity: declaringName(of: inverse.type, field: inverse.field),
                relationship: inverse.type.schemaMetadata[inverse.field].name
            )
            if inverse.isToOne {
                plan[field] = .viaInverse(index: TreeName.toOneIndex(entity: other.entity, relationship: other.relationship))
            } else if "\(own.entity).\(own.relationship)" <= "\(other.entity).\(other.relationship)" {
                plan[field] = ownJoin
            } else {
                plan[field] = .mirror(
                    of: TreeName.join(entity: other.entity, relationship: other.relationship),
                    tree: TreeName.mirror(entity: other.entity, relationship: other.relationship))
            }
        }
        return plan
    }
}

/// Keys of reverse indexes and join trees: two row ids, each a tag 0x20
/// and 8 bytes big-endian with the sign bit flipped (18 bytes; the fixed
/// integer form ``KeyEncoding`` used before its integers became compact),
/// ordered by the first, then the second.
package enum PairKey {
    /// The key of the pair (`first`, `second`), written directly (delete
    /// rules build one per reverse-index entry they remove).
    static func encode(_ first: Int64, _ second: Int64) -> [UInt8] {
        // A literal filled in place (see `RowKey.encode`).
        var key: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        key.withUnsafeMutableBytes { write(first, second, to: $0) }
        return key
    }

    /// The first half of every key whose first row is `row`: where a
    /// cursor seeks to read the pairs of `row`.
    static func prefix(_ row: Int64) -> [UInt8] {
        var key: [UInt8] = [0x20, 0, 0, 0, 0, 0, 0, 0, 0]
        key.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: (UInt64(bitPattern: row) ^ (1 << 63)).bigEndian, toByteOffset: 1, as: UInt64.self)
        }
        return key
    }

    /// Appends the pair key of `first` and `second` to `batch`.
    static func append(_ first: Int64, _ second: Int64, to batch: inout KeyBatch) {
        batch.append(count: size) { write(first, second, to: $0) }
    }

    /// A pair key's length: two integer elements of a tag and 8 bytes.
    private static let size = 18

    private static func write(_ first: Int64, _ second: Int64, to raw: UnsafeMutableRawBufferPointer) {
        raw[0] = 0x20
        raw.storeBytes(of: (UInt64(bitPattern: first) ^ (1 << 63)).bigEndian, toByteOffset: 1, as: UInt64.self)
        raw[9] = 0x20
        raw.storeBytes(of: (UInt64(bitPattern: second) ^ (1 << 63)).bigEndian, toByteOffset: 10, as: UInt64.self)
    }

    /// The second rows of the pairs in `tree` whose first row is `row`,
    /// read in place with one cursor. A damaged key ends the run (the
    /// integrity check reports it).
    package static func rows(in tree: Tree, of row: Int64, tx: ReadTransaction) throws -> [Int64] {
        var rows: [Int64] = []
        let cursor = try tx.cursor(tree)
        var more = try cursor.seek(prefix(row))
        while more {
            let pair = try cursor.withEntry { key, _ in decode(key) }
            guard let (first, second) = pair, first == row else { break }
            rows.append(second)
            more = try cursor.next()
        }
        return rows
    }

    /// The two rows of a key, or nil when the bytes are not a pair key.
    static func decode(_ key: [UInt8]) -> (Int64, Int64)? {
        key.withUnsafeBytes { decode($0) }
    }

    /// The two rows of a key read in place, or nil when the bytes are not
    /// a pair key (18 bytes: two integer elements).
    static func decode(_ key: UnsafeRawBufferPointer) -> (Int64, Int64)? {
        guard key.count == 18, key[0] == 0x20, key[9] == 0x20 else { return nil }
        func int(at offset: Int) -> Int64 {
            var value: UInt64 = 0
            for index in offset..<offset + 8 { value = value << 8 | UInt64(key[index]) }
            return Int64(bitPattern: value ^ (1 << 63))
        }
        return (int(at: 1), int(at: 10))
    }
}
