import Foundation
import StrataEngine

// Over 500 lines: the record format's writer and reader, with the
// per-type overloads the `@Model` macro's generated code calls; they
// change together with the format.

/// The binary record format of a model row.
///
/// A record is a format byte (1) followed by fields in ascending field
/// number. Each field is a tag, `field << 3 | wire`, as a varint, then its
/// payload:
///
/// | wire | payload | used for |
/// |---|---|---|
/// | 0 | varint | Bool, unsigned integers, signed integers (zigzag), to-one row ids |
/// | 1 | 8 bytes, little-endian | Double, Date (seconds since 2001 as a Double) |
/// | 2 | varint length, bytes | String (UTF-8), Data, UUID, URL, Decimal, Codable values |
/// | 3 | none | nil |
/// | 5 | 4 bytes, little-endian | Float |
///
/// Every field can be skipped without knowing its type, so a record written
/// before an attribute was added or removed still reads. Fields are tagged
/// with the attribute's field number; a missing optional field reads as nil.
/// Codable values (structs, Codable enums, arrays, dictionaries) use
/// ``_BinaryEncoder``'s self-describing format, never JSON.
public struct _RecordWriter {
    /// The record so far: the format byte, then the fields written, in order.
    /// Not meant to be used directly.
    public internal(set) var bytes: [UInt8]
    /// Fields kept outside the record (`.externalStorage`), with their tree.
    var externalTrees: [Int: String] = [:]
    /// The external values to store (nil: remove), by tree. A field whose
    /// value was never loaded is unchanged and absent here.
    var externals: [(tree: String, value: Data?)] = []
    /// Fields whose value could not be written (a `.transformable(by:)`
    /// transformer that failed), with why: the save throws instead of
    /// writing the record.
    var failures: [Int: SwiftDataError] = [:]
    /// The fields to write when only some are (a change of those fields,
    /// laid over the stored record by the save); nil writes every field.
    @usableFromInline var only: _FieldSet?

    /// A writer that writes into `buffer`'s storage, emptied, and leaves
    /// `buffer` empty: a caller that hands ``bytes`` back once done reuses
    /// one allocation from record to record.
    init(reusing buffer: inout [UInt8]) {
        bytes = takeStorage(of: &buffer)
        if bytes.capacity < 64 { bytes.reserveCapacity(64) }
        bytes.append(RecordFormat.version)
    }

    package init() {
        // Room first, then the version: a one-byte literal would allocate
        // a buffer that the reservation then replaces.
        bytes = []
        bytes.reserveCapacity(64)
        bytes.append(RecordFormat.version)
    }

    @usableFromInline mutating func tag(_ field: Int, _ wire: UInt8) { appendVarint(UInt64(field) << 3 | UInt64(wire)) }

    mutating func appendVarint(_ value: UInt64) { Varint.append(value, to: &bytes) }

    mutating func appendFixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func appendFixed32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func appendLengthDelimited(_ payload: some Collection<UInt8>) {
        appendVarint(UInt64(payload.count))
        bytes.append(contentsOf: payload)
    }

    @usableFromInline mutating func null(_ field: Int) { tag(field, RecordFormat.null) }

    /// True when field `field` is not to be written (``only``).
    @inlinable func skips(_ field: Int) -> Bool {
        guard let only else { return false }
        return !only.contains(field)
    }

    // MARK: Encoding overloads, chosen at compile time by the property's type

    /// Writes a record primitive as field `field`: its tag, then its payload.
    /// Called by code the `@Model` macro generates; not meant to be called
    /// directly.
    @inlinable public mutating func encode<T: _RecordPrimitive>(_ value: T, field: Int, state: _ModelState) {
        if skips(field) { return }
        tag(field, T._wire)
        value._appendPayload(to: &self)
    }

    /// Writes an optional record primitive; nil is written as a nil field.
    /// Called by code the `@Model` macro generates; not meant to be called
    /// directly.
    @inlinable public mutating func encode<T: _RecordPrimitive>(_ value: T?, field: Int, state: _ModelState) {
        if skips(field) { return }
        if let value { encode(value, field: field, state: state) } else { null(field) }
    }

    /// Writes an enum with a record-primitive raw value as its raw value.
    /// Called by code the `@Model` macro generates; not meant to be called
    /// directly.
    public mutating func encode<T: RawRepresentable & Encodable>(_ value: T, field: Int, state: _ModelState)
    where T.RawValue: _RecordPrimitive {
        if skips(field) { return }
        encode(value.rawValue, field: field, state: state)
    }

    /// Writes an optional enum with a record-primitive raw value: its raw
    /// value, or nil. Called by code the `@Model` macro generates; not meant to
    /// be called directly.
    public mutating func encode<T: RawRepresentable & Encodable>(_ value: T?, field: Int, state: _ModelState)
    where T.RawValue: _RecordPrimitive {
        if skips(field) { return }
        if let value { encode(value.rawValue, field: field, state: state) } else { null(field) }
    }

    /// Writes any other Encodable value in the binary Codable format,
    /// length-delimited. Called by code the `@Model` macro generates; not meant
    /// to be called directly.
    public mutating func encode<T: Encodable>(_ value: T, field: Int, state: _ModelState) {
        if skips(field) { return }
        tag(field, RecordFormat.lengthDelimited)
        appendLengthDelimited(_BinaryEncoder.encode(value))
    }

    /// Writes an optional Encodable value in the binary Codable format, or nil.
    /// Called by code the `@Model` macro generates; not meant to be called
    /// directly.
    public mutating func encode<T: Encodable>(_ value: T?, field: Int, state: _ModelState) {
        if skips(field) { return }
        if let value { encode(value, field: field, state: state) } else { null(field) }
    }

    /// Data, which may be kept outside the record.
    public mutating func encode(_ value: Data, field: Int, state: _ModelState) {
        if skips(field) { return }
        encode(Optional(value), field: field, state: state)
    }

    /// Optional Data, which may be kept outside the record: an
    /// `.externalStorage` field writes nothing here and queues its value for
    /// its own tree (unless the value was never loaded); any other field writes
    /// the bytes, or nil. Called by code the `@Model` macro generates; not
    /// meant to be called directly.
    public mutating func encode(_ value: Data?, field: Int, state: _ModelState) {
        if skips(field) { return }
        if let tree = externalTrees[field] {
            if !state.hasExternalFault(field: field) { externals.append((tree, value)) }
            return
        }
        if let value {
            tag(field, Data._wire)
            value._appendPayload(to: &self)
        } else {
            null(field)
        }
    }

    /// A to-one relationship: the target's row id.
    @inlinable public mutating func encode<T: PersistentModel>(_ value: T?, field: Int, state: _ModelState) {
        if skips(field) { return }
        encodeTarget(value?._strataState, field: field, state: state)
    }

    /// A non-optional to-one relationship: the target's row id.
    @inlinable public mutating func encode<T: PersistentModel>(_ value: T, field: Int, state: _ModelState) {
        if skips(field) { return }
        encodeTarget(value._strataState, field: field, state: state)
    }

    /// A to-one relationship's target, by its state (not generic: the
    /// overloads above are specialized where the model's class is known,
    /// and reach the target without looking up its type's metadata).
    @usableFromInline mutating func encodeTarget(_ target: _ModelState?, field: Int, state: _ModelState) {
        if let rows = state.faultRows(field: field) {
            if let row = rows.first { writeRow(row, field: field) } else { null(field) }
        } else if let target, target.rowID > 0, !target.deletedElsewhere {
            writeRow(target.rowID, field: field)
        } else {
            null(field)
        }
    }

    /// A to-many relationship is not part of the record: it lives in the
    /// index of its inverse to-one or in a join tree (``RelationshipStorage``).
    public mutating func encode<T: PersistentModel>(_ value: [T], field: Int, state: _ModelState) {}

    /// An optional to-many relationship: as a to-many, not in the record.
    public mutating func encode<T: PersistentModel>(_ value: [T]?, field: Int, state: _ModelState) {}

    // A model class that is also Codable matches both the Encodable and
    // the model overloads; these more specific ones make it a relationship.

    /// A to-one relationship to a model class that is also Encodable: the
    /// target's row id, as for any model. Called by code the `@Model` macro
    /// generates; not meant to be called directly.
    @inlinable public mutating func encode<T: PersistentModel & Encodable>(_ value: T?, field: Int, state: _ModelState) {
        if skips(field) { return }
        encodeTarget(value?._strataState, field: field, state: state)
    }

    /// A non-optional to-one relationship to a model class that is also
    /// Encodable: the target's row id. Called by code the `@Model` macro
    /// generates; not meant to be called directly.
    @inlinable public mutating func encode<T: PersistentModel & Encodable>(_ value: T, field: Int, state: _ModelState) {
        if skips(field) { return }
        encodeTarget(value._strataState, field: field, state: state)
    }

    /// A to-many relationship to a model class that is also Encodable: not part
    /// of the record. Called by code the `@Model` macro generates; not meant to
    /// be called directly.
    public mutating func encode<T: PersistentModel & Encodable>(_ value: [T], field: Int, state: _ModelState) {}

    /// An optional to-many relationship to a model class that is also
    /// Encodable: not part of the record. Called by code the `@Model` macro
    /// generates; not meant to be called directly.
    public mutating func encode<T: PersistentModel & Encodable>(_ value: [T]?, field: Int, state: _ModelState) {}

    /// Chosen only when no other overload takes the property's type: the
    /// `@Model` expansion then fails to compile with this message, at the
    /// line that writes the property, rather than with "no exact matches".
    @available(
        *, unavailable,
        message:
            "a @Model property must be Codable, a RawRepresentable enum, Data, a model or an array of models; store another type with @Attribute(.transformable(by:)), or mark the property @Transient"
    )
    public mutating func encode<T>(_ value: T, field: Int, state: _ModelState) {}

    private mutating func writeRow(_ row: Int64, field: Int) {
        tag(field, RecordFormat.varint)
        appendVarint(UInt64(row))
    }
}

/// `buffer`'s storage, emptied, leaving `buffer` empty: how a caller that
/// writes one record after another reuses one allocation (an array costs
/// about 700 instructions to allocate and free on Linux).
func takeStorage(of buffer: inout [UInt8]) -> [UInt8] {
    var taken: [UInt8] = []
    swap(&taken, &buffer)
    taken.removeAll(keepingCapacity: true)
    return taken
}

@usableFromInline package enum RecordFormat {
    static let version: UInt8 = 1
    static let varint: UInt8 = 0
    static let fixed64: UInt8 = 1
    package static let lengthDelimited: UInt8 = 2
    @usableFromInline package static let null: UInt8 = 3
    static let fixed32: UInt8 = 5
}

/// Reads a record's fields. Fields are found by a forward walk that
/// resumes where the previous one ended (generated code asks for them in
/// ascending order), falling back to a walk from the start.
///
/// The reader borrows the record's bytes — usually straight from a page of
/// the engine, without a copy — so it lives only inside the scope that
/// made it (``withReader(_:entity:row:_:)``).
///
/// The bytes are untrusted: every length and varint is checked, and a
/// damaged record throws ``SwiftDataError/corruptRecord`` naming the entity,
/// row and field.
public struct _RecordReader {
    @usableFromInline let bytes: UnsafeRawBufferPointer
    @usableFromInline var position = 1
    /// The entity whose record this is; not retained (the reader lives in
    /// a scope where its schema is alive), so making a reader costs no
    /// reference counting.
    unowned(unsafe) let entity: Schema.Entity
    let row: Int64
    var entityName: String { entity.name }
    /// Fields kept outside the record (`.externalStorage`), with their tree.
    var externalTrees: [Int: String] { entity.externalTrees }
    /// Loads the target of a non-optional to-one relationship, which a
    /// model cannot be made without; nil where no store is at hand.
    var loader: (any _RelatedModelLoader)?
    /// Attributes not to decode, as bits of field numbers (partial fetches
    /// leave out fields below 64 only): an attribute among them whose type
    /// has a placeholder (a record primitive, or any optional) reads as it
    /// and is marked unloaded on the model. Zero for a whole read, which
    /// then pays one test per field. A plain word: a reader is made per row
    /// of a scan, and a set with an array cost a retain and a release per
    /// row and per test.
    @usableFromInline var skipping: UInt64 = 0
    /// Reads `.externalStorage` fields from the record itself, as
    /// length-delimited data, instead of making them faults (sync's pulled
    /// values, which arrive beside the record); a fault the model held for
    /// such a field is dropped.
    package var inlinesExternal = false

    /// Inlined, and taking `entity` borrowed: a scan makes a reader for
    /// every row, and an owned argument cost a retain and a release each.
    @inline(__always)
    package init(borrowing bytes: UnsafeRawBufferPointer, entity: __shared Schema.Entity, row: Int64) throws {
        self.bytes = bytes
        self.entity = entity
        self.row = row
        guard bytes.first == RecordFormat.version else { throw badFormat() }
    }

    @inline(never) private func badFormat() -> SwiftDataError {
        corrupt(field: nil, bytes.isEmpty ? "empty record" : "unknown record format \(bytes[0])")
    }

    /// Runs `body` with a reader over `bytes`.
    package static func withReader<R>(
        _ bytes: [UInt8], entity: Schema.Entity, row: Int64, loader: (any _RelatedModelLoader)? = nil,
        inlinesExternal: Bool = false, _ body: (inout _RecordReader) throws -> R
    ) throws -> R {
        try bytes.withUnsafeBytes { raw in
            var reader = try _RecordReader(borrowing: raw, entity: entity, row: row)
            reader.loader = loader
            reader.inlinesExternal = inlinesExternal
            return try body(&reader)
        }
    }

    @usableFromInline func corrupt(field: Int?, _ reason: String) -> SwiftDataError {
        let place = field.map { " field \($0)" } ?? ""
        return SwiftDataError(.corruptRecord, "\(entityName) row \(row)\(place): \(reason)")
    }

    /// One field's wire type and payload bounds.
    public struct Slot: Sendable {
        @usableFromInline package var wire: UInt8
        @usableFromInline var start: Int
        @usableFromInline package var end: Int
    }

    @inline(__always) mutating func varint(at index: inout Int, limit: Int, field: Int?) throws -> UInt64 {
        guard let base = bytes.baseAddress else { throw corrupt(field: field, "truncated varint") }
        if let value = Varint.decode(base, at: &index, limit: limit) { return value }
        switch Varint.failure(at: index, limit: limit) {
        case .varintOverflow: throw corrupt(field: field, "varint overflows 64 bits")
        default: throw corrupt(field: field, "truncated varint")
        }
    }

    /// The slot of `field`, or nil when the record has no such field.
    @usableFromInline mutating func find(_ field: Int) throws -> Slot? {
        try find(field, skipping: true)
    }

    /// ``find(_:)`` for a model's initializer, which reads fields in
    /// field order: the wanted one is usually the very next, taken here
    /// without the walk. (A filter, which reads a field or two further
    /// on, calls `find` and skips this try.)
    @usableFromInline mutating func findInOrder(_ field: Int) throws -> Slot? {
        if let (current, slot) = simpleField(at: position), current == field {
            position = slot.end
            return slot
        }
        return try find(field, skipping: true)
    }

    /// ``find(_:)``; with `skipping` false, every field on the way is read
    /// through the checked path (the reference the tests hold the fast
    /// skip to).
    mutating func find(_ field: Int, skipping: Bool) throws -> Slot? {
        if let slot = try walk(from: position, to: field, skipping: skipping) { return slot }
        return position == 1 ? nil : try walk(from: 1, to: field, skipping: skipping)
    }

    private mutating func walk(from start: Int, to field: Int, skipping: Bool) throws -> Slot? {
        var index = start
        if skipping {
            // Fields before the wanted one are skipped from their first
            // bytes, and the wanted one read the same way, while they have
            // a simple shape (see `simpleField(at:)`); the checked walk
            // goes on from wherever that stops.
            while let (current, slot) = simpleField(at: index) {
                if current >= field {
                    guard current == field else { return nil }
                    position = slot.end
                    return slot
                }
                index = slot.end
            }
        }
        while index < bytes.count {
            let (current, slot, _) = try nextField(at: &index)
            if current == field {
                position = index
                return slot
            }
            if current > field { return nil }
        }
        return nil
    }

    /// The field at `index`, when it has a shape that can be read from its
    /// first bytes without checks that can fail: a one-byte tag (fields
    /// 1–15), then a varint of at most ten bytes, a fixed width, nil, or a
    /// length below 128 — all within the record. Nil for anything else (a
    /// longer tag or length, an unknown wire type, a payload past the
    /// end): the checked walk reads it, so damaged bytes still get its
    /// errors. This is what a scan with a filter runs on every row
    /// (`score > x` passes over `code`, `category` and `tag`).
    @inline(__always) fileprivate func simpleField(at index: Int) -> (field: Int, slot: Slot)? {
        guard let base = bytes.baseAddress, index < bytes.count else { return nil }
        let count = bytes.count
        let tag = base.load(fromByteOffset: index, as: UInt8.self)
        guard tag < 0x80 else { return nil }
        var start = index + 1
        var end = start
        // Literal cases: a case naming `RecordFormat`'s constants is an
        // expression pattern, matched through `~=` one case at a time.
        switch tag & 7 {
        case 0:  // varint
            guard let varintEnd = Varint.end(base, from: start, limit: count) else { return nil }
            end = varintEnd
        case 1:  // fixed64
            end += 8
        case 5:  // fixed32
            end += 4
        case 3:  // nil
            break
        case 2:  // length-delimited
            guard start < count else { return nil }
            let length = base.load(fromByteOffset: start, as: UInt8.self)
            guard length < 0x80 else { return nil }
            start += 1
            end = start + Int(length)
        default:
            return nil
        }
        guard end <= count else { return nil }
        return (Int(tag >> 3), Slot(wire: tag & 7, start: start, end: end))
    }

    /// Every field of the record in order, with where each one's encoded
    /// value begins (after its tag: a length-delimited value's length
    /// prefix included), so that a migration can copy fields under new
    /// numbers without decoding them.
    package mutating func fields() throws -> [(field: Int, slot: Slot, valueStart: Int)] {
        var result: [(field: Int, slot: Slot, valueStart: Int)] = []
        // At most one per property in a well-formed record: one allocation.
        result.reserveCapacity(entity.properties.count)
        var walk = FieldWalk()
        while let field = try walk.next(&self) { result.append(field) }
        return result
    }

    /// ``fields()`` one at a time, without an array: where the walk is,
    /// and the last field number it passed.
    struct FieldWalk {
        private var index = 1
        private var previous = -1

        /// The next field, or nil past the last; throws `corruptRecord`
        /// for fields out of order.
        ///
        /// Inlined: a walk's step is mostly this quick read, and as a call
        /// it cost about 87 instructions a field.
        @inline(__always) mutating func next(_ reader: inout _RecordReader) throws -> (
            field: Int, slot: Slot, valueStart: Int
        )? {
            guard index < reader.bytes.count else { return nil }
            // The quick read first (a one-byte tag); anything it cannot
            // read, and fields out of order, go through the checked one.
            if let (field, slot) = reader.simpleField(at: index), field > previous {
                let tagEnd = index + 1
                index = slot.end
                previous = field
                return (field, slot, tagEnd)
            }
            return try checkedNext(&reader)
        }

        /// ``next(_:)`` through the checked read.
        @inline(never) private mutating func checkedNext(_ reader: inout _RecordReader) throws -> (
            field: Int, slot: Slot, valueStart: Int
        )? {
            let (field, slot, tagEnd) = try reader.nextField(at: &index)
            if previous >= field { throw reader.corrupt(field: field, "fields out of order") }
            previous = field
            return (field, slot, tagEnd)
        }
    }

    /// The field that starts at `index` (a tag, then its payload), with the
    /// index just past its tag; moves `index` past the field.
    @inline(__always) private mutating func nextField(at index: inout Int) throws -> (Int, Slot, Int) {
        let count = bytes.count
        let tag = try varint(at: &index, limit: count, field: nil)
        let tagEnd = index
        let wire = UInt8(tag & 7)
        guard tag >> 3 <= UInt64(Int.max) else { throw corrupt(field: nil, "field number too large") }
        let current = Int(tag >> 3)
        let payloadStart: Int
        let end: Int
        switch wire {
        case 0:  // RecordFormat.varint (literal cases: see simpleField(at:))
            // Skipped, not decoded: find the byte that ends it (a read
            // that cannot find one says why).
            var probe = index
            if let base = bytes.baseAddress, let varintEnd = Varint.end(base, from: index, limit: count) {
                probe = varintEnd
            } else {
                _ = try varint(at: &probe, limit: count, field: current)
            }
            payloadStart = index
            end = probe
        case 1:  // fixed64
            payloadStart = index
            end = index + 8
        case 5:  // fixed32
            payloadStart = index
            end = index + 4
        case 2:  // length-delimited
            var probe = index
            let length = try varint(at: &probe, limit: count, field: current)
            guard length <= UInt64(count - probe) else { throw corrupt(field: current, "length past the end") }
            payloadStart = probe
            end = probe + Int(length)
        case 3:  // nil
            payloadStart = index
            end = index
        default:
            throw corrupt(field: current, "unknown wire type \(wire)")
        }
        guard end <= count else { throw corrupt(field: current, "payload past the end") }
        index = end
        return (current, Slot(wire: wire, start: payloadStart, end: end), tagEnd)
    }

    @usableFromInline func missing(_ field: Int) -> SwiftDataError {
        corrupt(field: field, "a non-optional value is missing")
    }

    func expect(_ slot: Slot, _ wire: UInt8, field: Int) throws {
        guard slot.wire == wire else {
            throw corrupt(field: field, "stored with wire type \(slot.wire), expected \(wire)")
        }
    }

    mutating func payloadVarint(_ slot: Slot, field: Int) throws -> UInt64 {
        try expect(slot, RecordFormat.varint, field: field)
        // A varint slot ends just past the varint's last byte (the walk
        // found that byte).
        if let base = bytes.baseAddress, let value = Varint.decode(base, filling: slot.start, to: slot.end) {
            return value
        }
        var index = slot.start
        return try varint(at: &index, limit: slot.end, field: field)
    }

    func payloadFixed64(_ slot: Slot, field: Int) throws -> UInt64 {
        try expect(slot, RecordFormat.fixed64, field: field)
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: slot.start, as: UInt64.self))
    }

    func payloadFixed32(_ slot: Slot, field: Int) throws -> UInt32 {
        try expect(slot, RecordFormat.fixed32, field: field)
        return UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: slot.start, as: UInt32.self))
    }

    /// The payload of a length-delimited field, borrowed from the record.
    func payloadBytes(_ slot: Slot, field: Int) throws -> UnsafeRawBufferPointer {
        try expect(slot, RecordFormat.lengthDelimited, field: field)
        return UnsafeRawBufferPointer(rebasing: bytes[slot.start..<slot.end])
    }

    // MARK: Decoding overloads, chosen at compile time by the property's type

    /// Reads a record primitive from field `field`. A missing or nil field
    /// reads as the type's placeholder when a custom migration stage added the
    /// attribute, and otherwise throws `corruptRecord`. Called by code the
    /// `@Model` macro generates; not meant to be called directly.
    @inlinable public mutating func decode<T: _RecordPrimitive>(_ type: T.Type, field: Int, state: _ModelState) throws -> T {
        if _slowPath(skipping != 0), let value = T._placeholder, leavesOut(field, state) { return value }
        guard let slot = try findInOrder(field), slot.wire != RecordFormat.null else { return try placeholder(field) }
        return try T._decode(slot, from: &self, field: field)
    }

    /// Whether attribute `field` is left out of this read; if so the model's
    /// state marks it unloaded.
    @usableFromInline func leavesOut(_ field: Int, _ state: _ModelState) -> Bool {
        guard field >= 0, field < 64, skipping & (1 << UInt64(field)) != 0 else { return false }
        state.setUnloaded(field: field)
        return true
    }

    /// A non-optional attribute's value is absent: damage, or an attribute
    /// a custom migration stage added and its `didMigrate` has not set yet
    /// (it then reads as the type's placeholder).
    @usableFromInline func placeholder<T: _RecordPrimitive>(_ field: Int) throws -> T {
        if let record = entity.defaultRecords[field] {
            return try Self.inDefault(record, field: field, self) { reader, slot in
                try T._decode(slot, from: &reader, field: field)
            }
        }
        if entity.placeholderFields.contains(field), let value = T._placeholder { return value }
        throw missing(field)
    }

    /// Runs `body` on the slot of `field` in `record`, one of the entity's
    /// ``Schema/Entity/defaultRecords``, with a reader over it.
    static func inDefault<R>(
        _ record: [UInt8], field: Int, _ owner: _RecordReader, _ body: (inout _RecordReader, Slot) throws -> R
    ) throws -> R {
        try record.withUnsafeBytes { raw in
            var reader = try _RecordReader(borrowing: raw, entity: owner.entity, row: owner.row)
            guard let slot = try reader.find(field), slot.wire != RecordFormat.null else { throw owner.missing(field) }
            return try body(&reader, slot)
        }
    }

    /// The wire type and encoded value (as ``fields()`` gives them) of
    /// `field`'s declared default, when it has one.
    package static func defaultEncoding(of field: Int, entity: Schema.Entity, row: Int64) throws -> (wire: UInt8, value: [UInt8])?
    {
        guard let record = entity.defaultRecords[field] else { return nil }
        return try firstField(of: record, entity: entity, row: row)
    }

    /// The wire type and encoded value of the first field of `record`.
    static func firstField(of record: [UInt8], entity: Schema.Entity, row: Int64 = 0) throws -> (wire: UInt8, value: [UInt8])? {
        try record.withUnsafeBytes { raw in
            var reader = try _RecordReader(borrowing: raw, entity: entity, row: row)
            guard let first = try reader.fields().first else { return nil }
            return (first.slot.wire, Array(raw[first.valueStart..<first.slot.end]))
        }
    }

    /// Reads an optional record primitive: nil when the field is missing or
    /// nil. Called by code the `@Model` macro generates; not meant to be called
    /// directly.
    @inlinable public mutating func decode<T: _RecordPrimitive>(_ type: T?.Type, field: Int, state: _ModelState) throws -> T? {
        if _slowPath(skipping != 0), leavesOut(field, state) { return nil }
        guard let slot = try findInOrder(field), slot.wire != RecordFormat.null else { return nil }
        return try T._decode(slot, from: &self, field: field)
    }

    /// Reads an enum with a record-primitive raw value; a raw value that no
    /// case has throws `corruptRecord`. Called by code the `@Model` macro
    /// generates; not meant to be called directly.
    public mutating func decode<T: RawRepresentable & Decodable>(_ type: T.Type, field: Int, state: _ModelState) throws -> T
    where T.RawValue: _RecordPrimitive {
        let raw = try decode(T.RawValue.self, field: field, state: state)
        guard let value = T(rawValue: raw) else { throw corrupt(field: field, "no \(T.self) has raw value \(raw)") }
        return value
    }

    /// Reads an optional enum with a record-primitive raw value: nil when the
    /// field is missing or nil. Called by code the `@Model` macro generates;
    /// not meant to be called directly.
    public mutating func decode<T: RawRepresentable & Decodable>(_ type: T?.Type, field: Int, state: _ModelState) throws -> T?
    where T.RawValue: _RecordPrimitive {
        guard let raw = try decode(T.RawValue?.self, field: field, state: state) else { return nil }
        guard let value = T(rawValue: raw) else { throw corrupt(field: field, "no \(T.self) has raw value \(raw)") }
        return value
    }

    /// Reads any other Decodable value from the binary Codable format; a
    /// missing or nil field, or bytes that do not decode, throw
    /// `corruptRecord`. Called by code the `@Model` macro generates; not meant
    /// to be called directly.
    public mutating func decode<T: Decodable>(_ type: T.Type, field: Int, state: _ModelState) throws -> T {
        guard let slot = try findInOrder(field), slot.wire != RecordFormat.null else {
            guard let record = entity.defaultRecords[field] else { throw missing(field) }
            return try Self.inDefault(record, field: field, self) { reader, slot in
                try reader.decodeCodable(T.self, slot, field: field)
            }
        }
        return try decodeCodable(T.self, slot, field: field)
    }

    /// Reads an optional Decodable value from the binary Codable format: nil
    /// when the field is missing or nil. Called by code the `@Model` macro
    /// generates; not meant to be called directly.
    public mutating func decode<T: Decodable>(_ type: T?.Type, field: Int, state: _ModelState) throws -> T? {
        if skipping != 0, leavesOut(field, state) { return nil }
        guard let slot = try findInOrder(field), slot.wire != RecordFormat.null else { return nil }
        return try decodeCodable(T.self, slot, field: field)
    }

    private func decodeCodable<T: Decodable>(_ type: T.Type, _ slot: Slot, field: Int) throws -> T {
        let payload = try payloadBytes(slot, field: field)
        do {
            return try _BinaryDecoder.decode(T.self, from: Array(payload)[...])
        } catch let error as _BinaryDecoder.Failure {
            throw corrupt(field: field, error.reason)
        } catch {
            throw corrupt(field: field, "\(T.self) did not decode: \(error)")
        }
    }

    /// Data, which may be kept outside the record: then it is a fault,
    /// loaded on first access.
    public mutating func decode(_ type: Data.Type, field: Int, state: _ModelState) throws -> Data {
        if let tree = externalTrees[field] {
            guard inlinesExternal else {
                state.setExternalFault(field: field, tree: tree, row: row)
                return Data()
            }
            _ = state.takeFault(field: field)
        }
        if skipping != 0, leavesOut(field, state) { return Data() }
        guard let slot = try findInOrder(field), slot.wire != RecordFormat.null else { return try placeholder(field) }
        return try Data._decode(slot, from: &self, field: field)
    }

    /// Optional Data, which may be kept outside the record: an
    /// `.externalStorage` field reads as nil for now and becomes a fault,
    /// loaded on first access; any other field reads its bytes, or nil. Called
    /// by code the `@Model` macro generates; not meant to be called directly.
    public mutating func decode(_ type: Data?.Type, field: Int, state: _ModelState) throws -> Data? {
        if let tree = externalTrees[field] {
            guard inlinesExternal else {
                state.setExternalFault(field: field, tree: tree, row: row)
                return nil
            }
            _ = state.takeFault(field: field)
        }
        if skipping != 0, leavesOut(field, state) { return nil }
        guard let slot = try findInOrder(field), slot.wire != RecordFormat.null else { return nil }
        return try Data._decode(slot, from: &self, field: field)
    }

    /// A to-one relationship: remembered as a fault, loaded on first access.
    public mutating func decode<T: PersistentModel>(_ type: T?.Type, field: Int, state: _ModelState) throws -> T? {
        if let row = try toOneRow(field: field) { state.setFault(field: field, rows: [row]) }
        return nil
    }

    /// The row id a to-one field holds, or nil when it is absent or nil.
    package mutating func toOneRow(field: Int) throws -> Int64? {
        guard let slot = try find(field), slot.wire != RecordFormat.null else { return nil }
        let row = try payloadVarint(slot, field: field)
        guard row > 0, row <= UInt64(Int64.max) else { throw corrupt(field: field, "row id \(row) out of range") }
        return Int64(row)
    }

    /// A non-optional to-one relationship cannot be left unloaded (the
    /// model's property must hold a model), so its target is loaded with
    /// the model. A record without it, or with a row that is not stored,
    /// is damaged.
    public mutating func decode<T: PersistentModel>(_ type: T.Type, field: Int, state: _ModelState) throws -> T {
        guard let row = try toOneRow(field: field) else { throw missing(field) }
        guard let loader else {
            throw corrupt(field: field, "the \(T.self) it requires cannot be loaded without a context")
        }
        guard let target = try loader.loadRequired(T.self, row: row) as? T else {
            throw corrupt(field: field, "the \(T.self) it requires (row \(row)) is not stored")
        }
        return target
    }

    /// A to-many relationship is not part of the record (a field written
    /// by an older format is skipped); the context points it at the tree
    /// that holds it, and it loads on first access.
    public mutating func decode<T: PersistentModel>(_ type: [T].Type, field: Int, state: _ModelState) throws -> [T] {
        []
    }

    /// An optional to-many relationship: as a to-many (a stored model's
    /// is an empty list until it loads, never nil).
    public mutating func decode<T: PersistentModel>(_ type: [T]?.Type, field: Int, state: _ModelState) throws -> [T]? {
        []
    }

    // A model class that is also Codable matches both the Decodable and
    // the model overloads; these more specific ones make it a relationship.

    /// A to-one relationship to a model class that is also Decodable:
    /// remembered as a fault, loaded on first access. Called by code the
    /// `@Model` macro generates; not meant to be called directly.
    public mutating func decode<T: PersistentModel & Decodable>(_ type: T?.Type, field: Int, state: _ModelState) throws
        -> T?
    { try decodeModel(T?.self, field: field, state: state) }

    /// A non-optional to-one relationship to a model class that is also
    /// Decodable: its target, loaded with the model. Called by code the
    /// `@Model` macro generates; not meant to be called directly.
    public mutating func decode<T: PersistentModel & Decodable>(_ type: T.Type, field: Int, state: _ModelState) throws -> T {
        try decodeModel(T.self, field: field, state: state)
    }

    /// A to-many relationship to a model class that is also Decodable: not part
    /// of the record; it loads on first access. Called by code the `@Model`
    /// macro generates; not meant to be called directly.
    public mutating func decode<T: PersistentModel & Decodable>(_ type: [T].Type, field: Int, state: _ModelState) throws
        -> [T]
    { [] }

    /// An optional to-many relationship to a model class that is also
    /// Decodable: not part of the record; it loads on first access. Called by
    /// code the `@Model` macro generates; not meant to be called directly.
    public mutating func decode<T: PersistentModel & Decodable>(_ type: [T]?.Type, field: Int, state: _ModelState) throws
        -> [T]?
    { [] }

    /// Chosen only when no other overload takes the property's type, as
    /// the writer's: a compile-time error that says what to write.
    @available(
        *, unavailable,
        message:
            "a @Model property must be Codable, a RawRepresentable enum, Data, a model or an array of models; store another type with @Attribute(.transformable(by:)), or mark the property @Transient"
    )
    public mutating func decode<T>(_ type: T.Type, field: Int, state: _ModelState) throws -> T {
        throw missing(field)
    }

    private mutating func decodeModel<T: PersistentModel>(_ type: T?.Type, field: Int, state: _ModelState) throws -> T? {
        try decode(T?.self, field: field, state: state)
    }

    private mutating func decodeModel<T: PersistentModel>(_ type: T.Type, field: Int, state: _ModelState) throws -> T {
        try decode(T.self, field: field, state: state)
    }
}

extension _RecordWriter {
    /// Encodes a value known only as `Any` — a declared default value
    /// that a migration writes into existing records — as the `@Model`
    /// expansion would encode a property of its type: record primitives
    /// directly, enums with a primitive raw value by that value, other
    /// Codable values in the binary Codable format, nil as nil. False when
    /// the value has no record encoding.
    mutating func encodeAny(_ value: Any, field: Int) -> Bool {
        if let optional = value as? any OptionalValue {
            guard let wrapped = optional.wrappedValue else {
                null(field)
                return true
            }
            return encodeAny(wrapped, field: field)
        }
        if let primitive = value as? any _RecordPrimitive {
            appendPrimitive(primitive, field: field)
            return true
        }
        if value is any Encodable, let raw = value as? any RawRepresentable,
            let primitive = raw.rawValue as? any _RecordPrimitive
        {
            appendPrimitive(primitive, field: field)
            return true
        }
        if let encodable = value as? any Encodable {
            tag(field, RecordFormat.lengthDelimited)
            appendLengthDelimited(_BinaryEncoder.encode(encodable))
            return true
        }
        return false
    }

    private mutating func appendPrimitive<T: _RecordPrimitive>(_ value: T, field: Int) {
        tag(field, T._wire)
        value._appendPayload(to: &self)
    }

    /// Appends a field copied from another record: `field`'s tag with
    /// `wire`, then the encoded value as it was (`value`: from just after
    /// the old tag to the end of the payload).
    package mutating func appendCopy(field: Int, wire: UInt8, value: UnsafeRawBufferPointer) {
        tag(field, wire)
        bytes.append(contentsOf: value)
    }
}

/// Loads the target of a non-optional to-one relationship while a model is
/// being made (``_RecordReader/decode(_:field:state:)``).
package protocol _RelatedModelLoader: AnyObject {
    /// The model of `type` stored in `row`, or nil when no such row is
    /// stored. Throws when its record cannot be read, or when required
    /// relationships nest too deeply (a cycle of them).
    func loadRequired(_ type: any PersistentModel.Type, row: Int64) throws -> (any PersistentModel)?
}

/// Loads required to-one targets straight from a transaction's records,
/// as new unregistered models: for code that makes models outside a
/// context (a save's key computation, the integrity check).
final class RecordModelLoader: _RelatedModelLoader {
    private let schema: Schema
    private let record: (Schema.Entity, Int64) throws -> [UInt8]?
    private var depth = 0

    init(schema: Schema, record: @escaping (Schema.Entity, Int64) throws -> [UInt8]?) {
        self.schema = schema
        self.record = record
    }

    package func loadRequired(_ type: any PersistentModel.Type, row: Int64) throws -> (any PersistentModel)? {
        guard let entity = schema.entity(forType: type) else {
            throw SwiftDataError(.unknownModelType, "\(type) is not in the schema")
        }
        guard depth < ModelContext.requiredLoadLimit else {
            throw SwiftDataError(
                .corruptRecord,
                "\(entity.name) row \(row): more than \(ModelContext.requiredLoadLimit) non-optional to-one "
                    + "relationships lead from one model to the next (a cycle of them cannot be loaded)")
        }
        depth += 1
        defer { depth -= 1 }
        guard let bytes = try record(entity, row) else { return nil }
        return try _RecordReader.withReader(bytes, entity: entity, row: row, loader: self) {
            try entity.type.init(_strataReader: &$0)
        }
    }
}
