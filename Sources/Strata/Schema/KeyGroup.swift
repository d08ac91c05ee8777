import StrataEngine

/// One unique constraint or index of an entity, and the tree that holds it
/// (the "Object mapping" article, "Unique constraints and indexes"):
///
/// - a unique constraint is the tree `u.<Entity>.<a>+<b>`: key = the
///   encoded values (``KeyEncoding``) → the row id (8 bytes, big-endian);
/// - an index is the tree `i.<Entity>.<a>+<b>`: key = the encoded values
///   followed by the row id as an integer element → empty.
///
/// Both are maintained by `save()` in the same write transaction as the
/// records. A unique constraint is also an index (its tree is ordered by
/// the values), so the query layer can seek in either.
struct KeyGroup: CustomStringConvertible {
    enum Kind: String {
        case unique, index

        /// How messages name a group of this kind.
        var noun: String { self == .unique ? "a unique constraint" : "an index" }
    }

    let kind: Kind
    let entityName: String
    let properties: [Schema.Property]
    let treeName: String

    var description: String { "\(kind.rawValue) (\(properties.map(\.name).joined(separator: ", ")))" }

    /// The values of `model` for this group, in order. A to-one
    /// relationship's value is its target's row (an integer), or null; a
    /// to-one not loaded yet gives the row its record names.
    func values(of model: any PersistentModel) -> [KeyEncoding.Element] {
        properties.map { property in
            let element = model._strataKeyElement(field: property.field) ?? .null
            if element == .null, property is Schema.Relationship,
                let row = model._strataState.faultRows(field: property.field)?.first
            {
                return .int(row)
            }
            return element
        }
    }

    /// The unique tree's key, or the index tree's key for `row`.
    func key(_ values: [KeyEncoding.Element], row: Int64) -> [UInt8] {
        switch kind {
        case .unique: return KeyEncoding.encode(values)
        case .index: return KeyEncoding.encode(values + [.int(row)])
        }
    }

    /// Throws ``SwiftDataError/modelValidationFailure`` when a key of
    /// `length` bytes for row `row` is longer than a tree's key can be
    /// (`Database.maxKeyLength`); the message names the model and the
    /// group, so the save that meets it fails before its commit with the
    /// store unchanged.
    func checkLength(_ length: Int, row: Int64) throws {
        guard length > Database.maxKeyLength else { return }
        let limit = Database.maxKeyLength - (kind == .index ? Self.indexRowSuffix : 0)
        throw SwiftDataError(
            .modelValidationFailure,
            "\(entityName)/p\(row): the values of its \(self) take \(valuesLength(length)) bytes "
                + "encoded; \(kind.noun) holds values of at most \(limit) bytes "
                + "(leave long attributes out of #Index and #Unique)")
    }

    /// The bytes of a key of `length` bytes that hold the values.
    private func valuesLength(_ length: Int) -> Int { kind == .index ? length - Self.indexRowSuffix : length }

    /// The bytes an index key's row takes at its end: the integer element's
    /// tag and 8 bytes.
    static let indexRowSuffix = 9

    /// The row id ending an index key (an integer key element: tag `0x20`,
    /// then the row big-endian with its sign bit flipped); nil when the key
    /// does not end with one.
    static func row(inIndexKey key: UnsafeRawBufferPointer) -> Int64? {
        guard key.count >= indexRowSuffix, key[key.count - indexRowSuffix] == 0x20 else { return nil }
        var value: UInt64 = 0
        for index in (key.count - 8)..<key.count { value = value << 8 | UInt64(key[index]) }
        return Int64(bitPattern: value ^ (1 << 63))
    }

    /// The row id a unique tree's value holds (8 bytes, big-endian); nil
    /// for a value of another size.
    static func row(inUniqueValue value: UnsafeRawBufferPointer) -> Int64? {
        guard value.count == 8 else { return nil }
        var result: UInt64 = 0
        for byte in value { result = result << 8 | UInt64(byte) }
        return Int64(bitPattern: result)
    }

    /// Builds and checks the groups of entity `entity`. Each group must name
    /// stored attributes of keyable types; a group repeated under the same
    /// kind is kept once.
    static func groups(entity: String, properties: [Schema.Property], unique: [[String]], indices: [[String]])
        -> ([KeyGroup], [String])
    {
        var groups: [KeyGroup] = []
        var problems: [String] = []
        var seen: Set<String> = []
        let declared = unique.map { (Kind.unique, $0) } + indices.map { (Kind.index, $0) }
        for (kind, names) in declared {
            guard !names.isEmpty else {
                problems.append("\(entity): \(kind.noun) with no property")
                continue
            }
            var members: [Schema.Property] = []
            for name in names {
                guard let property = properties.first(where: { $0.name == name }) else {
                    problems.append("\(entity): \(kind.rawValue) names \(name), which is not a stored property")
                    continue
                }
                if let relationship = property as? Schema.Relationship {
                    // A to-one is keyed by its target's row, as SwiftData
                    // indexes a to-one by its foreign key.
                    if !relationship.isToOneRelationship {
                        problems.append("\(entity).\(name): a to-many relationship cannot be part of \(kind.noun)")
                    }
                } else if !KeyValue.isKeyable(property.valueType) {
                    problems.append(
                        "\(entity).\(name): \(property.valueType) values cannot be part of \(kind.noun) "
                            + "(keyable: numbers, Bool, String, Date, Data, UUID, URL, enums with such raw values, "
                            + "and optionals of these)")
                }
                members.append(property)
            }
            let treeName = TreeName.keyGroup(kind, entity: entity, names: names)
            guard members.count == names.count, seen.insert(treeName).inserted else { continue }
            groups.append(KeyGroup(kind: kind, entityName: entity, properties: members, treeName: treeName))
        }
        return (groups, problems)
    }
}
