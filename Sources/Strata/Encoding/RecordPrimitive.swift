/// A value with its own field encoding in records (see ``_RecordWriter``):
/// the standard library's numbers, Bool and String, and Foundation's Date,
/// Data, UUID, URL and Decimal. Everything else Codable goes through the
/// binary Codable format.
public protocol _RecordPrimitive: Codable {
    /// The wire type of the type's fields. For code the `@Model` macro
    /// generates; not meant to be called directly.
    static var _wire: UInt8 { get }
    /// Appends the value's payload, without its tag, to `writer`. For code the
    /// `@Model` macro generates; not meant to be called directly.
    func _appendPayload(to writer: inout _RecordWriter)
    /// Reads a value of the type from the payload in `slot`; throws
    /// `corruptRecord` when the payload does not hold one. For code the
    /// `@Model` macro generates; not meant to be called directly.
    static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Self
    /// The value a model reads for an attribute a custom migration stage
    /// added without a default, until its `didMigrate` sets it; nil for a
    /// type without an obvious empty value.
    static var _placeholder: Self? { get }
}

extension _RecordPrimitive {
    /// No placeholder: the default, for types without an obvious empty value.
    /// For code the `@Model` macro generates; not meant to be called directly.
    public static var _placeholder: Self? { nil }
}

extension _RecordPrimitive where Self: Numeric {
    /// The placeholder of a number: zero. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public static var _placeholder: Self? { .zero }
}

extension Bool {
    /// The placeholder of a Bool: `false`. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public static var _placeholder: Bool? { false }
}

extension String {
    /// The placeholder of a String: the empty string. For code the `@Model`
    /// macro generates; not meant to be called directly.
    public static var _placeholder: String? { "" }
}

extension Date {
    /// The placeholder of a Date: the reference date, 1 January 2001 at 00:00
    /// UTC. For code the `@Model` macro generates; not meant to be called
    /// directly.
    public static var _placeholder: Date? { Date(timeIntervalSinceReferenceDate: 0) }
}

extension Data {
    /// The placeholder of Data: empty data. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public static var _placeholder: Data? { Data() }
}

extension UUID {
    /// The placeholder of a UUID: the all-zero UUID. For code the `@Model`
    /// macro generates; not meant to be called directly.
    public static var _placeholder: UUID? { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
}

extension Bool: _RecordPrimitive {
    /// A Bool is a varint. For code the `@Model` macro generates; not meant to
    /// be called directly.
    public static var _wire: UInt8 { RecordFormat.varint }
    /// Appends 1 for true, 0 for false. For code the `@Model` macro generates;
    /// not meant to be called directly.
    public func _appendPayload(to writer: inout _RecordWriter) { writer.appendVarint(self ? 1 : 0) }
    /// Reads 0 or 1; any other number throws `corruptRecord`. For code the
    /// `@Model` macro generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Bool {
        switch try reader.payloadVarint(slot, field: field) {
        case 0: return false
        case 1: return true
        case let other: throw reader.corrupt(field: field, "\(other) is not a Bool")
        }
    }
}

/// Signed integers: zigzag varints, so small negative numbers stay short.
public protocol _SignedRecordInteger: _RecordPrimitive, FixedWidthInteger, SignedInteger {}

extension _SignedRecordInteger {
    /// A signed integer is a varint. For code the `@Model` macro generates; not
    /// meant to be called directly.
    public static var _wire: UInt8 { RecordFormat.varint }
    /// Appends the value zigzag-encoded, as a varint. For code the `@Model`
    /// macro generates; not meant to be called directly.
    public func _appendPayload(to writer: inout _RecordWriter) {
        let value = Int64(self)
        writer.appendVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }
    /// Reads a zigzag varint; a value the type cannot hold throws
    /// `corruptRecord`. For code the `@Model` macro generates; not meant to be
    /// called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Self {
        let raw = try reader.payloadVarint(slot, field: field)
        let value = Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
        guard let result = Self(exactly: value) else { throw reader.corrupt(field: field, "\(value) does not fit \(Self.self)") }
        return result
    }
}

/// Unsigned integers: plain varints.
public protocol _UnsignedRecordInteger: _RecordPrimitive, FixedWidthInteger, UnsignedInteger {}

extension _UnsignedRecordInteger {
    /// An unsigned integer is a varint. For code the `@Model` macro generates;
    /// not meant to be called directly.
    public static var _wire: UInt8 { RecordFormat.varint }
    /// Appends the value as a varint. For code the `@Model` macro generates;
    /// not meant to be called directly.
    public func _appendPayload(to writer: inout _RecordWriter) { writer.appendVarint(UInt64(self)) }
    /// Reads a varint; a value the type cannot hold throws `corruptRecord`. For
    /// code the `@Model` macro generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Self {
        let value = try reader.payloadVarint(slot, field: field)
        guard let result = Self(exactly: value) else { throw reader.corrupt(field: field, "\(value) does not fit \(Self.self)") }
        return result
    }
}

// Each integer type states its own `_decode`, so that the witness is
// specialized for the type: the protocol extension's default, used as a
// witness, runs unspecialized generic code (`init(exactly:)` through
// metadata) for every field of every record.

@inline(__always) func _decodeSigned<T: FixedWidthInteger & SignedInteger>(
    _ slot: _RecordReader.Slot, _ reader: inout _RecordReader, _ field: Int
) throws -> T {
    let raw = try reader.payloadVarint(slot, field: field)
    let value = Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    guard let result = T(exactly: value) else { throw reader.corrupt(field: field, "\(value) does not fit \(T.self)") }
    return result
}

@inline(__always) func _decodeUnsigned<T: FixedWidthInteger & UnsignedInteger>(
    _ slot: _RecordReader.Slot, _ reader: inout _RecordReader, _ field: Int
) throws -> T {
    let value = try reader.payloadVarint(slot, field: field)
    guard let result = T(exactly: value) else { throw reader.corrupt(field: field, "\(value) does not fit \(T.self)") }
    return result
}

extension Int: _SignedRecordInteger {
    /// Reads a zigzag varint into an `Int` (a witness specialized for the
    /// type); a value it cannot hold throws `corruptRecord`. For code the
    /// `@Model` macro generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Int {
        try _decodeSigned(slot, &reader, field)
    }
}
extension Int8: _SignedRecordInteger {
    /// Reads a zigzag varint into an `Int8` (a witness specialized for the
    /// type); a value it cannot hold throws `corruptRecord`. For code the
    /// `@Model` macro generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Int8 {
        try _decodeSigned(slot, &reader, field)
    }
}
extension Int16: _SignedRecordInteger {
    /// Reads a zigzag varint into an `Int16` (a witness specialized for the
    /// type); a value it cannot hold throws `corruptRecord`. For code the
    /// `@Model` macro generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Int16 {
        try _decodeSigned(slot, &reader, field)
    }
}
extension Int32: _SignedRecordInteger {
    /// Reads a zigzag varint into an `Int32` (a witness specialized for the
    /// type); a value it cannot hold throws `corruptRecord`. For code the
    /// `@Model` macro generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Int32 {
        try _decodeSigned(slot, &reader, field)
    }
}
extension Int64: _SignedRecordInteger {
    /// Reads a zigzag varint into an `Int64` (a witness specialized for the
    /// type); a value it cannot hold throws `corruptRecord`. For code the
    /// `@Model` macro generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Int64 {
        try _decodeSigned(slot, &reader, field)
    }
}
extension UInt: _UnsignedRecordInteger {
    /// Reads a varint into a `UInt` (a witness specialized for the type); a
    /// value it cannot hold throws `corruptRecord`. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> UInt {
        try _decodeUnsigned(slot, &reader, field)
    }
}
extension UInt8: _UnsignedRecordInteger {
    /// Reads a varint into a `UInt8` (a witness specialized for the type); a
    /// value it cannot hold throws `corruptRecord`. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> UInt8 {
        try _decodeUnsigned(slot, &reader, field)
    }
}
extension UInt16: _UnsignedRecordInteger {
    /// Reads a varint into a `UInt16` (a witness specialized for the type); a
    /// value it cannot hold throws `corruptRecord`. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> UInt16 {
        try _decodeUnsigned(slot, &reader, field)
    }
}
extension UInt32: _UnsignedRecordInteger {
    /// Reads a varint into a `UInt32` (a witness specialized for the type); a
    /// value it cannot hold throws `corruptRecord`. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> UInt32 {
        try _decodeUnsigned(slot, &reader, field)
    }
}
extension UInt64: _UnsignedRecordInteger {
    /// Reads a varint into a `UInt64` (a witness specialized for the type); a
    /// value it cannot hold throws `corruptRecord`. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> UInt64 {
        try _decodeUnsigned(slot, &reader, field)
    }
}

extension Double: _RecordPrimitive {
    /// A Double is 8 bytes. For code the `@Model` macro generates; not meant to
    /// be called directly.
    public static var _wire: UInt8 { RecordFormat.fixed64 }
    /// Appends the value's IEEE 754 bits, little-endian. For code the `@Model`
    /// macro generates; not meant to be called directly.
    public func _appendPayload(to writer: inout _RecordWriter) { writer.appendFixed64(bitPattern) }
    /// Reads 8 bytes of IEEE 754 bits. For code the `@Model` macro generates;
    /// not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Double {
        Double(bitPattern: try reader.payloadFixed64(slot, field: field))
    }
}

extension Float: _RecordPrimitive {
    /// A Float is 4 bytes. For code the `@Model` macro generates; not meant to
    /// be called directly.
    public static var _wire: UInt8 { RecordFormat.fixed32 }
    /// Appends the value's IEEE 754 bits, little-endian. For code the `@Model`
    /// macro generates; not meant to be called directly.
    public func _appendPayload(to writer: inout _RecordWriter) { writer.appendFixed32(bitPattern) }
    /// Reads 4 bytes of IEEE 754 bits. For code the `@Model` macro generates;
    /// not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Float {
        Float(bitPattern: try reader.payloadFixed32(slot, field: field))
    }
}

extension Date: _RecordPrimitive {
    /// A Date is 8 bytes. For code the `@Model` macro generates; not meant to
    /// be called directly.
    public static var _wire: UInt8 { RecordFormat.fixed64 }
    /// Appends the seconds since 1 January 2001 as a Double's bits,
    /// little-endian. For code the `@Model` macro generates; not meant to be
    /// called directly.
    public func _appendPayload(to writer: inout _RecordWriter) {
        writer.appendFixed64(timeIntervalSinceReferenceDate.bitPattern)
    }
    /// Reads the seconds since 1 January 2001 as a Double. For code the
    /// `@Model` macro generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Date {
        Date(timeIntervalSinceReferenceDate: Double(bitPattern: try reader.payloadFixed64(slot, field: field)))
    }
}

extension String: _RecordPrimitive {
    /// A String is length-delimited. For code the `@Model` macro generates; not
    /// meant to be called directly.
    public static var _wire: UInt8 { RecordFormat.lengthDelimited }
    /// Appends the UTF-8 bytes, after their length. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public func _appendPayload(to writer: inout _RecordWriter) {
        var copy = self
        copy.withUTF8 { writer.appendLengthDelimited($0) }
    }
    /// Reads UTF-8 bytes; invalid UTF-8 throws `corruptRecord`. For code the
    /// `@Model` macro generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> String {
        let payload = try reader.payloadBytes(slot, field: field)
        let buffer = payload.assumingMemoryBound(to: UInt8.self)
        // ASCII (the common case) is valid UTF-8 as it is; the checked path
        // is only needed for the rest.
        let text = isASCII(payload) ? String(decoding: buffer, as: UTF8.self) : String(validating: buffer, as: UTF8.self)
        guard let text else { throw reader.corrupt(field: field, "invalid UTF-8 in a String") }
        return text
    }
}

extension Data: _RecordPrimitive {
    /// Data is length-delimited. For code the `@Model` macro generates; not
    /// meant to be called directly.
    public static var _wire: UInt8 { RecordFormat.lengthDelimited }
    /// Appends the bytes, after their length. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public func _appendPayload(to writer: inout _RecordWriter) { writer.appendLengthDelimited(self) }
    /// Reads the bytes. For code the `@Model` macro generates; not meant to be
    /// called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Data {
        Data(try reader.payloadBytes(slot, field: field))
    }
}

extension UUID: _RecordPrimitive {
    /// A UUID is length-delimited. For code the `@Model` macro generates; not
    /// meant to be called directly.
    public static var _wire: UInt8 { RecordFormat.lengthDelimited }
    /// Appends the 16 bytes, after their length. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public func _appendPayload(to writer: inout _RecordWriter) {
        withUnsafeBytes(of: uuid) { writer.appendLengthDelimited($0) }
    }
    /// Reads 16 bytes; any other length throws `corruptRecord`. For code the
    /// `@Model` macro generates; not meant to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> UUID {
        let payload = try reader.payloadBytes(slot, field: field)
        guard payload.count == 16 else { throw reader.corrupt(field: field, "a UUID of \(payload.count) bytes") }
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &raw) { $0.copyBytes(from: payload) }
        return UUID(uuid: raw)
    }
}

extension URL: _RecordPrimitive {
    /// A URL is length-delimited text. For code the `@Model` macro generates;
    /// not meant to be called directly.
    public static var _wire: UInt8 { RecordFormat.lengthDelimited }
    /// Appends `absoluteString` as a String. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public func _appendPayload(to writer: inout _RecordWriter) { absoluteString._appendPayload(to: &writer) }
    /// Reads a String and parses it as a URL; text that does not parse throws
    /// `corruptRecord`. For code the `@Model` macro generates; not meant to be
    /// called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> URL {
        let text = try String._decode(slot, from: &reader, field: field)
        guard let url = URL(string: text) else { throw reader.corrupt(field: field, "not a URL: \(text)") }
        return url
    }
}

/// Decimal is stored as its exact decimal text (locale-independent).
extension Decimal: _RecordPrimitive {
    /// A Decimal is length-delimited text. For code the `@Model` macro
    /// generates; not meant to be called directly.
    public static var _wire: UInt8 { RecordFormat.lengthDelimited }
    /// Appends the exact decimal text (`description`) as a String. For code the
    /// `@Model` macro generates; not meant to be called directly.
    public func _appendPayload(to writer: inout _RecordWriter) { description._appendPayload(to: &writer) }
    /// Reads decimal text, parsed without a locale; text that does not parse
    /// throws `corruptRecord`. For code the `@Model` macro generates; not meant
    /// to be called directly.
    public static func _decode(_ slot: _RecordReader.Slot, from reader: inout _RecordReader, field: Int) throws -> Decimal {
        let text = try String._decode(slot, from: &reader, field: field)
        guard let value = Decimal(string: text, locale: nil) else {
            throw reader.corrupt(field: field, "not a Decimal: \(text)")
        }
        return value
    }
}

/// Whether every byte of `bytes` is below 0x80, eight at a time.
@inline(__always) func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard let base = bytes.baseAddress else { return true }
    var combined: UInt64 = 0
    var offset = 0
    while offset + 8 <= bytes.count {
        combined |= base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
        offset += 8
    }
    while offset < bytes.count {
        combined |= UInt64(base.load(fromByteOffset: offset, as: UInt8.self))
        offset += 1
    }
    return combined & 0x8080_8080_8080_8080 == 0
}
