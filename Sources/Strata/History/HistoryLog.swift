import Foundation
import StrataEngine

/// The history trees and their format.
///
/// - `h.transactions`: key = the token (8 bytes, big-endian) → the
///   transaction: format byte 1; author (varint length + 1, 0 for nil,
///   then UTF-8); timestamp (8 bytes, a Double's bits, little-endian);
///   process name; then groups of changes, each: kind byte, entity name,
///   the attribute names it refers to, and its rows (zigzag deltas), with
///   an update's attribute indexes or a delete's tombstone.
///   The one-byte key `0xFF`, after every token, holds the last token
///   issued: it shares the tree's last leaf with the newest transaction,
///   so a save's history dirties one page, not two.
/// - `h.meta`: `deleted` → the greatest token whose transaction was
///   deleted. A token below it is expired: history after it is no longer
///   complete. Stores written before the counter moved hold the last
///   token under `last` here; the greater of the two counters is the
///   last token.
/// - `h.holds`: a holder's name (UTF-8) → the token (`RowKey`) after which
///   `deleteHistory` keeps every transaction for it (see
///   ``hold(_:after:in:)``). Erased with the data by `deleteAllData()`.
///
/// Tokens come from the counter, not from the tree's last transaction,
/// so a token is never reused after history is deleted.
package enum HistoryLog {
    static let transactions = TreeName.historyTransactions
    static let meta = TreeName.historyMeta
    static let lastKey = Array("last".utf8)
    /// The last token issued, in `h.transactions`: sorts after every
    /// token (a token's first byte is below 0x80).
    static let counterKey: [UInt8] = [0xFF]

    /// True for a key of `h.transactions` that is a transaction's token
    /// (the counter's is not).
    static func isToken(_ key: [UInt8]) -> Bool { key.count == 8 }
    static let deletedKey = Array("deleted".utf8)

    /// Writes `recorder`'s changes as the next transaction; returns its
    /// token value. `last`: the last token issued in `tx`, when the caller
    /// read it (``lastToken(_:)``) and wrote no history since.
    @discardableResult
    static func append(
        _ recorder: HistoryRecorder, author: String?, tx: WriteTransaction, after last: Int64? = nil
    ) throws -> Int64 {
        let tree = try tx.treeIfPresent(transactions) ?? tx.createTree(transactions)
        let token = try (last ?? lastToken(tx, transactions: tree)) + 1
        try tx.put(counterKey, RowKey.encode(token), in: tree)
        var out: [UInt8] = [1]
        func varint(_ value: UInt64) { Varint.append(value, to: &out) }
        func text(_ value: String) {
            varint(UInt64(value.utf8.count))
            out.append(contentsOf: value.utf8)
        }
        if let author {
            varint(UInt64(author.utf8.count) + 1)
            out.append(contentsOf: author.utf8)
        } else {
            varint(0)
        }
        withUnsafeBytes(of: Date().timeIntervalSinceReferenceDate.bitPattern.littleEndian) { out.append(contentsOf: $0) }
        text(ProcessInfo.processInfo.processName)
        varint(UInt64(recorder.groups.count))
        for group in recorder.groups {
            out.append(group.kind.rawValue)
            text(group.entity)
            varint(UInt64(group.names.count))
            for name in group.names { text(name) }
            varint(UInt64(group.rows.count))
            var previous: Int64 = 0
            for (index, row) in group.rows.enumerated() {
                let delta = row &- previous
                varint(UInt64(bitPattern: (delta << 1) ^ (delta >> 63)))
                previous = row
                switch group.kind {
                case .insert: break
                case .update:
                    let attributes = group.attributes(ofUpdate: index)
                    varint(UInt64(attributes.count))
                    for attribute in attributes { varint(UInt64(attribute)) }
                case .delete:
                    varint(UInt64(group.tombstones[index].count))
                    out.append(contentsOf: group.tombstones[index])
                }
            }
        }
        try tx.put(RowKey.encode(token), out, in: tree)
        return token
    }

    /// The token of the last transaction written (0 when none was).
    package static func lastToken(_ tx: ReadTransaction) throws -> Int64 {
        try lastToken(tx, transactions: tx.treeIfPresent(transactions))
    }

    /// The last token issued: the counter in `h.transactions`, or the one
    /// an older store kept in `h.meta`, whichever is greater.
    private static func lastToken(_ tx: ReadTransaction, transactions tree: Tree?) throws -> Int64 {
        let current = try tree.flatMap { try counter(counterKey, $0, tx) } ?? 0
        let legacy = try tx.treeIfPresent(meta).flatMap { try counter(lastKey, $0, tx) } ?? 0
        return max(current, legacy)
    }

    /// The stored transactions after token `after` through `through`,
    /// decoded without model types, in token order; those in `skipping`
    /// are left out undecoded.
    package static func readRaw(
        _ tx: ReadTransaction, after: Int64, through: Int64, skipping: Set<Int64> = []
    ) throws -> [RawTransaction] {
        guard let tree = try tx.treeIfPresent(transactions) else { return [] }
        var result: [RawTransaction] = []
        try tx.forEach(tree, from: RowKey.encode(after + 1)) { key, value in
            guard isToken(key) else { return false }
            let token = try RowKey.decode(key)
            guard token <= through else { return false }
            if !skipping.contains(token) { result.append(try decodeRaw(value, token: token)) }
            return true
        }
        return result
    }

    static func counter(_ key: [UInt8], _ tree: Tree, _ tx: ReadTransaction) throws -> Int64? {
        guard let bytes = try tx.get(key, in: tree) else { return nil }
        return try RowKey.decode(bytes)
    }

    /// The greatest deleted token (0 when none was).
    static func deletedThrough(_ tx: ReadTransaction) throws -> Int64 {
        guard let tree = try tx.treeIfPresent(meta) else { return 0 }
        return try counter(deletedKey, tree, tx) ?? 0
    }

    /// Stored transactions from token `from` on, decoded, in token order.
    static func read(_ tx: ReadTransaction, schema: Schema, store: String, from: Int64 = 0) throws
        -> [DefaultHistoryTransaction]
    {
        guard let tree = try tx.treeIfPresent(transactions) else { return [] }
        var result: [DefaultHistoryTransaction] = []
        try tx.forEach(tree, from: from > 0 ? RowKey.encode(from) : nil) { key, value in
            guard isToken(key) else { return false }
            result.append(try decode(value, token: try RowKey.decode(key), schema: schema, store: store))
            return true
        }
        return result
    }

    /// One stored transaction, decoded without model types.
    package struct RawTransaction {
        package struct Change {
            package var kind: HistoryRecorder.Kind
            package var entity: String
            package var row: Int64
            /// An update's changed attributes.
            package var attributes: [String]
            /// A delete's preserved values (a record whose field numbers
            /// index ``names``), and the names.
            var tombstone: [UInt8]
            var names: [String]
        }

        package var token: Int64
        package var author: String?
        var timestamp: Date
        var process: String
        package var changes: [Change]
    }

    /// Decodes one transaction's bytes, which are untrusted.
    static func decodeRaw(_ bytes: [UInt8], token: Int64) throws -> RawTransaction {
        try bytes.withUnsafeBytes { raw in
            var input = HistoryInput(reader: ByteReader(raw), token: token)
            return try decodeRaw(&input)
        }
    }

    private static func decodeRaw(_ input: inout HistoryInput) throws -> RawTransaction {
        let token = input.token
        guard try input.byte() == 1 else { throw input.corrupt("unknown history format") }
        // The author's length plus one, zero for none.
        let authorLength = try input.count(bias: 1)
        let author = authorLength == 0 ? nil : try input.text(length: authorLength - 1)
        let timestamp = Date(timeIntervalSinceReferenceDate: Double(bitPattern: try input.fixed64()))
        let process = try input.text(length: try input.count())
        var changes: [RawTransaction.Change] = []
        for _ in 0..<(try input.count()) {
            guard let kind = HistoryRecorder.Kind(rawValue: try input.byte()) else { throw input.corrupt("unknown change kind") }
            let entity = try input.text(length: try input.count())
            var names: [String] = []
            for _ in 0..<(try input.count()) { names.append(try input.text(length: try input.count())) }
            var row: Int64 = 0
            for _ in 0..<(try input.count()) {
                let zigzag = try input.varint()
                row &+= Int64(bitPattern: (zigzag >> 1) ^ (0 &- (zigzag & 1)))
                var change = RawTransaction.Change(
                    kind: kind, entity: entity, row: row, attributes: [], tombstone: [], names: [])
                switch kind {
                case .insert: break
                case .update:
                    for _ in 0..<(try input.count()) {
                        // An index into the names, not a count of bytes.
                        let index = try input.varint()
                        guard index < UInt64(names.count) else { throw input.corrupt("attribute index out of range") }
                        change.attributes.append(names[Int(index)])
                    }
                case .delete:
                    change.tombstone = try input.slice(length: try input.count())
                    change.names = names
                }
                changes.append(change)
            }
        }
        return RawTransaction(token: token, author: author, timestamp: timestamp, process: process, changes: changes)
    }

    /// Decodes one transaction for `schema`'s models; changes of entities
    /// the schema does not hold are left out.
    static func decode(_ bytes: [UInt8], token: Int64, schema: Schema, store: String) throws -> DefaultHistoryTransaction {
        let raw = try decodeRaw(bytes, token: token)
        var inserts: [HistoryChange] = []
        var updates: [HistoryChange] = []
        var deletes: [HistoryChange] = []
        for (number, change) in raw.changes.enumerated() {
            guard let entity = schema.entity(named: change.entity) else { continue }
            let id = PersistentIdentifier(storeIdentifier: store, entityName: change.entity, rowID: change.row)
            let changeNumber = Int64(number + 1)
            switch change.kind {
            case .insert: inserts.append(.insert(makeInsert(entity.type, id, changeNumber, token)))
            case .update: updates.append(.update(makeUpdate(entity.type, id, changeNumber, token, change.attributes)))
            case .delete:
                let values = try tombstoneValues(change.tombstone, names: change.names, entity: entity, row: change.row)
                deletes.append(.delete(makeDelete(entity.type, id, changeNumber, token, values)))
            }
        }
        return DefaultHistoryTransaction(
            token: DefaultHistoryToken(storeIdentifier: store, tokenValue: token), author: raw.author,
            timestamp: raw.timestamp, changes: inserts + updates + deletes, bundleIdentifier: raw.process,
            processIdentifier: raw.process)
    }

    private static func makeInsert<M: PersistentModel>(
        _ type: M.Type, _ id: PersistentIdentifier, _ change: Int64, _ token: Int64
    )
        -> any HistoryInsert
    {
        DefaultHistoryInsert<M>(changedPersistentIdentifier: id, changeIdentifier: change, transactionIdentifier: token)
    }

    private static func makeUpdate<M: PersistentModel>(
        _ type: M.Type, _ id: PersistentIdentifier, _ change: Int64, _ token: Int64, _ names: [String]
    ) -> any HistoryUpdate {
        let paths = names.compactMap { name in
            M.schemaMetadata.first { $0.name == name }?.keypath as? PartialKeyPath<M>
        }
        return DefaultHistoryUpdate<M>(
            changedPersistentIdentifier: id, changeIdentifier: change, transactionIdentifier: token, updatedAttributes: paths)
    }

    private static func makeDelete<M: PersistentModel>(
        _ type: M.Type, _ id: PersistentIdentifier, _ change: Int64, _ token: Int64, _ values: [String: Any]
    ) -> any HistoryDelete {
        DefaultHistoryDelete<M>(
            changedPersistentIdentifier: id, changeIdentifier: change, transactionIdentifier: token,
            tombstone: HistoryTombstone(values: values))
    }

    /// A tombstone's values, each of its attribute's declared type; values
    /// of attributes the entity no longer has are left out.
    private static func tombstoneValues(_ bytes: [UInt8], names: [String], entity: Schema.Entity, row: Int64) throws
        -> [String: Any]
    {
        guard !bytes.isEmpty else { return [:] }
        return try bytes.withUnsafeBytes { raw in
            var reader = try _RecordReader(borrowing: raw, entity: entity, row: row)
            var values: [String: Any] = [:]
            for field in try reader.fields() {
                guard field.field < names.count,
                    let property = entity.properties.first(where: { $0.name == names[field.field] }),
                    property is Schema.Attribute
                else { continue }
                let value = try reader.queryValue(field: field.field, kind: property.storedKind)
                if let converted = value.converted(to: property.valueType) { values[property.name] = converted }
            }
            return values
        }
    }
}

/// The bounded reader over a stored history transaction, its failures
/// given as ``SwiftDataError/corruptRecord`` naming the transaction.
private struct HistoryInput {
    var reader: ByteReader
    let token: Int64

    func corrupt(_ reason: String) -> SwiftDataError {
        SwiftDataError(.corruptRecord, "history transaction \(token): \(reason)")
    }

    private func corrupt(_ error: ByteReadError) -> SwiftDataError { corrupt(error.description) }

    mutating func byte() throws -> UInt8 {
        do { return try reader.byte() } catch { throw corrupt(error) }
    }

    mutating func varint() throws -> UInt64 {
        do { return try reader.varint() } catch { throw corrupt(error) }
    }

    /// A count or length, which cannot exceed the bytes left (plus `bias`).
    mutating func count(bias: Int = 0) throws -> Int {
        do { return try reader.count(bias: bias) } catch { throw corrupt(error) }
    }

    mutating func slice(length: Int) throws -> [UInt8] {
        do { return try reader.copy(length) } catch { throw corrupt(error) }
    }

    mutating func text(length: Int) throws -> String {
        do { return try reader.text(length: length) } catch { throw corrupt(error) }
    }

    mutating func fixed64() throws -> UInt64 {
        do { return try reader.littleEndian(UInt64.self) } catch { throw corrupt(error) }
    }
}

extension QueryValue {
    /// The value as an instance of `type` (a property's declared type),
    /// undoing the record's representation: integers of any width, Date
    /// from seconds, URL from text, enums from their raw value.
    func converted(to type: Any.Type) -> Any? {
        if let optional = type as? any _OptionalMarker.Type { return converted(to: optional._wrappedType) }
        if let raw = type as? any (RawRepresentable).Type, !(type is any _RecordPrimitive.Type) {
            return rawConverted(raw)
        }
        switch self {
        case .scalar(let element):
            switch element {
            case .null: return nil
            case .bool(let value): return value
            case .int(let value):
                if let integer = type as? any FixedWidthInteger.Type { return exactly(integer, value) }
                return value
            case .uint(let value):
                if let integer = type as? any FixedWidthInteger.Type { return exactly(integer, value) }
                return value
            case .double(let value):
                if type == Date.self { return Date(timeIntervalSinceReferenceDate: value) }
                if type == Float.self { return Float(value) }
                return value
            case .string(let value):
                if type == URL.self { return URL(string: value) }
                return value
            case .bytes(let value): return Data(value)
            case .uuid(let value): return value
            }
        case .opaque(let value): return value
        default: return nil
        }
    }

    private func rawConverted<R: RawRepresentable>(_ type: R.Type) -> Any? {
        guard let raw = converted(to: R.RawValue.self) as? R.RawValue else { return nil }
        return R(rawValue: raw)
    }
}

private func exactly<T: FixedWidthInteger>(_ type: T.Type, _ value: some BinaryInteger) -> Any? { T(exactly: value) }

/// Implemented by the predicate expressions that can bound a history
/// fetch: `token > t` and `token >= t` on the transaction, and `&&` of
/// them. The fetch then starts at the bound instead of the first
/// transaction (the predicate is still evaluated on what it reads), so a
/// consumer polling for what happened after its token reads only that.
protocol HistoryTokenBound {
    /// The least token value the expression can accept, when it says.
    var historyLowerBound: Int64? { get }
}

extension PredicateExpressions.Conjunction: HistoryTokenBound {
    var historyLowerBound: Int64? {
        let bounds = [lhs, rhs].compactMap { ($0 as? any HistoryTokenBound)?.historyLowerBound }
        return bounds.max()
    }
}

extension PredicateExpressions.Comparison: HistoryTokenBound
where
    LHS == PredicateExpressions.KeyPath<PredicateExpressions.Variable<DefaultHistoryTransaction>, DefaultHistoryToken>,
    RHS == PredicateExpressions.Value<DefaultHistoryToken>
{
    var historyLowerBound: Int64? {
        guard lhs.keyPath == \DefaultHistoryTransaction.token else { return nil }
        switch op {
        case .greaterThan: return rhs.value.tokenValue == .max ? nil : rhs.value.tokenValue + 1
        case .greaterThanOrEqual: return rhs.value.tokenValue
        default: return nil
        }
    }
}

extension HistoryLog {
    /// Where a fetch with `predicate` can start (0: the beginning).
    static func lowerBound<T>(of predicate: Predicate<T>?) -> Int64 {
        (predicate?.expression as? any HistoryTokenBound)?.historyLowerBound ?? 0
    }
}
