import StrataEngine

/// One unique constraint or index of an entity, and the tree that holds it
/// (the "Object mapping" article, "Unique constraints and indexes"):
///
/// - a unique constraint is the tree `u.<Entity>.<a>+<b>`: key = the
///   encoded values (``KeyEncoding``) → the row id, big-endian in its
///   significant bytes (1–8; stores written before compact keys hold 8);
/// - an index is the tree `i.<Entity>.<a>+<b>`: key = the encoded values,
///   the row id as an integer element, and one byte holding that
///   element's length (so the row is read from the key's end) → empty.
///
/// Both are maintained by `save()` in the same write transaction as the
/// records. A unique constraint is also an index (its tree is ordered by
/// the values), so the query layer can seek in either.
package struct KeyGroup: CustomStringConvertible {
    enum Kind: String {
        case unique, index

        /// How messages name a group of this kind.
        var noun: String { self == .unique ? "a unique constraint" : "an index" }
    }

    let kind: Kind
    let entityName: String
    package let properties: [Schema.Property]
    package let treeName: String
    /// The fields of ``properties``: a save asks whether a change touches
    /// the group once per changed model.
    let fields: _FieldSet

    init(kind: Kind, entityName: String, properties: [Schema.Property], treeName: String) {
        self.kind = kind
        self.entityName = entityName
        self.properties = properties
        self.treeName = treeName
        var fields = _FieldSet()
        for property in properties { fields.insert(property.field) }
        self.fields = fields
    }

    package var description: String { "\(kind.rawValue) (\(properties.map(\.name).joined(separator: ", ")))" }

    /// The values of `model` for this group, in order. A to-one
    /// relationship's value is its target's row (an integer), or null; a
    /// to-one not loaded yet gives the row its record names.
    package func values(of model: any PersistentModel) -> [KeyEncoding.Element] {
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
    package func key(_ values: [KeyEncoding.Element], row: Int64) -> [UInt8] {
        var key = KeyEncoding.encode(values)
        if kind == .index { Self.appendRow(row, to: &key) }
        return key
    }

    /// Appends an index key's row suffix: `row` as an integer element, then
    /// the element's length in one byte.
    static func appendRow(_ row: Int64, to key: inout [UInt8]) {
        withUnsafeTemporaryAllocation(byteCount: maxRowSuffix, alignment: 8) { buffer in
            guard let base = buffer.baseAddress else { return }
            let count = storeRow(row, at: base)
            key.append(contentsOf: UnsafeRawBufferPointer(start: base, count: count))
        }
    }

    /// Writes an index key's row suffix for `row` at `target`; returns its
    /// length (2–10 bytes).
    @discardableResult @inline(__always)
    static func storeRow(_ row: Int64, at target: UnsafeMutableRawPointer) -> Int {
        let (code, word) = KeyEncoding.signed(row)
        let count = KeyEncoding.store(code: code, word: word, at: target)
        target.storeBytes(of: UInt8(count), toByteOffset: count, as: UInt8.self)
        return count + 1
    }

    /// The length of the row suffix ``storeRow(_:at:)`` writes for `row`.
    @inline(__always) static func rowSuffixLength(_ row: Int64) -> Int {
        let (code, word) = KeyEncoding.signed(row)
        return KeyEncoding.count(code: code, word: word) + 1
    }

    /// The most bytes an index key's row suffix takes.
    static let maxRowSuffix = KeyEncoding.maxFixedCount + 1

    /// The length of the row suffix ending index key `key`, or nil when
    /// the key does not end with one.
    @inline(__always) static func rowSuffixLength(inIndexKey key: UnsafeRawBufferPointer) -> Int? {
        guard let last = key.last, (1...KeyEncoding.maxFixedCount).contains(Int(last)), key.count > Int(last) else {
            return nil
        }
        return Int(last) + 1
    }

    /// The row id ending an index key (see ``storeRow(_:at:)``); nil when
    /// the key does not end with one.
    static func row(inIndexKey key: UnsafeRawBufferPointer) -> Int64? {
        guard let suffix = rowSuffixLength(inIndexKey: key) else { return nil }
        let start = key.count - suffix
        let code = key[start]
        let n = Int(code) - 0x88
        guard abs(n) == suffix - 2 else { return nil }
        var value: UInt64 = 0
        for index in (start + 1)..<(key.count - 1) { value = value << 8 | UInt64(key[index]) }
        if n >= 0 { return value <= UInt64(Int64.max) ? Int64(value) : nil }
        let magnitude = ~value & (UInt64.max >> (64 - 8 * (suffix - 2)))
        return magnitude <= 1 << 63 ? Int64(bitPattern: 0 &- magnitude) : nil
    }

    /// The encoded values of index key `key`: the key without its row
    /// suffix (all of it when it has none).
    static func values(inIndexKey key: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: key.dropLast(rowSuffixLength(inIndexKey: key) ?? 0))
    }

    /// A unique tree's value for `row`: its significant bytes, big-endian
    /// (at least one).
    static func uniqueValue(_ row: Int64) -> [UInt8] {
        let bits = UInt64(bitPattern: row)
        let count = max(1, KeyEncoding.significantBytes(bits))
        return (0..<count).map { UInt8(truncatingIfNeeded: bits >> UInt64(8 * (count - 1 - $0))) }
    }

    /// The row a unique tree's value holds; throws
    /// ``SwiftDataError/corruptRecord`` for a value of no row.
    package static func row(inUniqueValue value: [UInt8]) throws -> Int64 {
        guard let row = value.withUnsafeBytes({ row(inUniqueValue: $0) }) else {
            throw SwiftDataError(.corruptRecord, "a unique entry's row of \(value.count) bytes")
        }
        return row
    }

    /// The most bytes the encoded values of row `row`'s key may take: a
    /// tree's key holds at most `Database.maxKeyLength` bytes, and an
    /// index key also holds the row (2–10 bytes: 950 bytes of values fit
    /// every row, 951 most).
    func maxValuesLength(row: Int64) -> Int {
        Database.maxKeyLength - (kind == .index ? Self.rowSuffixLength(row) : 0)
    }

    /// Throws ``SwiftDataError/modelValidationFailure`` when values encoded
    /// in `length` bytes, of row `row`, are longer than
    /// ``maxValuesLength(row:)``; the message names the model and the
    /// group, so the save that meets it fails before its commit with the
    /// store unchanged.
    func checkLength(values length: Int, row: Int64) throws {
        let limit = maxValuesLength(row: row)
        guard length > limit else { return }
        throw SwiftDataError(
            .modelValidationFailure,
            "\(entityName)/p\(row): the values of its \(self) take \(length) bytes encoded; "
                + "\(kind.noun) holds values of at most \(limit) bytes "
                + "(leave long attributes out of #Index and #Unique)")
    }

    /// ``checkLength(values:row:)`` for key `key` of this group.
    func checkLength(ofKey key: [UInt8], row: Int64) throws {
        let suffix = kind == .index ? key.withUnsafeBytes { Self.rowSuffixLength(inIndexKey: $0) } ?? 0 : 0
        try checkLength(values: key.count - suffix, row: row)
    }

    /// The row id a unique tree's value holds (1–8 bytes, big-endian); nil
    /// for a value of another size.
    static func row(inUniqueValue value: UnsafeRawBufferPointer) -> Int64? {
        guard (1...8).contains(value.count) else { return nil }
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
