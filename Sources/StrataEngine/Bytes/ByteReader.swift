/// Strata's one variable-length integer codec and its one bounded byte
/// reader. Every format that stores lengths and counts as varints (B+tree
/// cells, records, history transactions, sync payloads, the binary coder of
/// `Codable` attributes) encodes with ``Varint`` and decodes through it;
/// every decoder of bytes that come from disk or the network reads them
/// with ``ByteReader``, so that a truncated or forged input gives the same
/// checks everywhere and the fuzz targets of any one format cover them.
///
/// The varint is unsigned LEB128:
///
/// ```
/// value 0…127            one byte: the value
/// value ≥ 128            7 bits per byte, least significant group first;
///                        every byte but the last has its top bit (0x80) set
/// longest                10 bytes for a UInt64; the tenth byte holds bit 63
///                        alone, so it is 0 or 1 (anything else overflows)
/// ```
///
/// A value is written in its shortest form; a reader also accepts a
/// longer form (trailing `0x80` groups) of the same value, as every
/// format here always has.
package enum Varint {
    /// The longest encoding of a `UInt64`.
    package static let maximumLength = 10

    /// The number of bytes `value` takes.
    @inlinable @inline(__always)
    package static func size(of value: UInt64) -> Int {
        // One byte per started group of 7 significant bits.
        let bits = 64 - (value | 1).leadingZeroBitCount
        return (bits + 6) / 7
    }

    /// Appends `value` to `out`.
    @inlinable
    package static func append(_ value: UInt64, to out: inout [UInt8]) {
        var rest = value
        while rest >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        out.append(UInt8(rest))
    }

    /// Writes `value` at `pointer`, which has room for
    /// `size(of: value)` bytes, and returns that size.
    @inlinable @inline(__always)
    package static func store(_ value: UInt64, at pointer: UnsafeMutableRawPointer) -> Int {
        var rest = value
        var offset = 0
        while rest >= 0x80 {
            pointer.storeBytes(of: UInt8(truncatingIfNeeded: rest) | 0x80, toByteOffset: offset, as: UInt8.self)
            rest >>= 7
            offset += 1
        }
        pointer.storeBytes(of: UInt8(rest), toByteOffset: offset, as: UInt8.self)
        return offset + 1
    }

    /// Decodes the varint that starts at `base + index` and ends before
    /// `base + limit`, and moves `index` past it. Nil, with `index`
    /// unchanged, when no byte before `limit` ends it or when it holds
    /// more than 64 bits (``failure(_:at:limit:)`` says which).
    @inlinable @inline(__always)
    package static func decode(_ base: UnsafeRawPointer, at index: inout Int, limit: Int) -> UInt64? {
        var offset = index
        guard offset < limit else { return nil }
        let first = base.load(fromByteOffset: offset, as: UInt8.self)
        if first < 0x80 {
            index = offset + 1
            return UInt64(first)
        }
        var result = UInt64(first & 0x7F)
        var shift: UInt64 = 7
        offset += 1
        while offset < limit {
            let byte = base.load(fromByteOffset: offset, as: UInt8.self)
            offset += 1
            if shift == 63 && byte > 1 { return nil }
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 {
                index = offset
                return result
            }
            shift += 7
        }
        return nil
    }

    /// Decodes the varint that fills `base[start..<end]` exactly, where
    /// `end` came from ``end(_:from:limit:)`` (so only its last byte lacks
    /// the continuation bit): without the checks of
    /// ``decode(_:at:limit:)``, for a record field read on every row of a
    /// scan. Nil unless it is 1 to 9 bytes long (nine hold 63 bits, so
    /// nothing can overflow); the caller then reads it the checked way.
    @inlinable @inline(__always)
    package static func decode(_ base: UnsafeRawPointer, filling start: Int, to end: Int) -> UInt64? {
        let length = end - start
        guard length >= 1 && length <= 9 else { return nil }
        var result: UInt64 = 0
        var shift: UInt64 = 0
        for offset in start..<end {
            result |= UInt64(base.load(fromByteOffset: offset, as: UInt8.self) & 0x7F) << shift
            shift += 7
        }
        return result
    }

    /// Why ``decode(_:at:limit:)`` found no varint at `index`: with ten
    /// bytes or more before `limit`, the tenth held more than bit 63;
    /// with fewer, none of them ended the varint.
    @inlinable
    package static func failure(at index: Int, limit: Int) -> ByteReadError {
        limit - index >= maximumLength ? .varintOverflow(offset: index) : .truncated(offset: index)
    }

    /// The index just past the varint that starts at `start`: its first
    /// byte without the continuation bit, among the first ten before
    /// `limit`; nil when there is none. Skips a varint without decoding
    /// it; eight bytes are looked at in one word when there are eight.
    @inlinable @inline(__always)
    package static func end(_ base: UnsafeRawPointer, from start: Int, limit: Int) -> Int? {
        if start + 8 <= limit {
            let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: start, as: UInt64.self))
            let last = ~word & 0x8080_8080_8080_8080
            if last != 0 { return start + last.trailingZeroBitCount / 8 + 1 }
        }
        let stop = min(limit, start + maximumLength)
        var end = start
        while end < stop && base.load(fromByteOffset: end, as: UInt8.self) >= 0x80 { end += 1 }
        return end < stop ? end + 1 : nil
    }
}

/// Bytes that a ``ByteReader`` could not read: where, and why. Each format
/// turns it into its own typed error, with its own context (a record's
/// entity and field, a history transaction's token, a page's number).
package enum ByteReadError: Error, Equatable, CustomStringConvertible {
    /// The input ends before the value it announced.
    case truncated(offset: Int)
    /// A varint longer than 64 bits.
    case varintOverflow(offset: Int)
    /// A count or length larger than the bytes left could hold.
    case countPastEnd(count: UInt64, offset: Int)
    /// Text that is not UTF-8.
    case invalidUTF8(offset: Int)

    package var offset: Int {
        switch self {
        case .truncated(let offset), .varintOverflow(let offset), .countPastEnd(_, let offset),
            .invalidUTF8(let offset):
            return offset
        }
    }

    package var description: String {
        switch self {
        case .truncated: return "truncated"
        case .varintOverflow: return "varint overflows 64 bits"
        case .countPastEnd(let count, _): return "a count of \(count) past the end"
        case .invalidUTF8: return "not UTF-8"
        }
    }
}

/// A cursor over borrowed bytes that checks every read against the end:
/// no read goes past ``limit``, no count or length is believed that the
/// bytes left could not hold (so a forged count cannot allocate
/// gigabytes), and every failure is a ``ByteReadError`` with the offset
/// where it happened. The reader borrows its bytes, so it lives inside the
/// scope that lends them (`withUnsafeBytes`, a pinned page). A read that
/// fails leaves ``index`` where it was.
package struct ByteReader {
    /// The bytes read: offsets are relative to its start.
    package let bytes: UnsafeRawBufferPointer
    /// The offset of the next byte to read.
    package var index: Int
    /// The offset reads stop at.
    package let limit: Int

    /// A reader of `bytes[start..<limit]` (`limit` defaults to the end).
    @inlinable
    package init(_ bytes: UnsafeRawBufferPointer, from start: Int = 0, limit: Int? = nil) {
        self.bytes = bytes
        self.limit = Swift.min(limit ?? bytes.count, bytes.count)
        self.index = Swift.min(Swift.max(start, 0), self.limit)
    }

    /// The bytes not yet read.
    @inlinable package var remaining: Int { limit - index }

    /// True when every byte has been read.
    @inlinable package var isAtEnd: Bool { index == limit }

    @inlinable
    package mutating func byte() throws(ByteReadError) -> UInt8 {
        guard index < limit, let base = bytes.baseAddress else { throw .truncated(offset: index) }
        index += 1
        return base.load(fromByteOffset: index - 1, as: UInt8.self)
    }

    @inlinable
    package mutating func varint() throws(ByteReadError) -> UInt64 {
        guard let base = bytes.baseAddress else { throw .truncated(offset: index) }
        guard let value = Varint.decode(base, at: &index, limit: limit) else {
            throw Varint.failure(at: index, limit: limit)
        }
        return value
    }

    /// A varint read as a count of items or bytes that follow: never more
    /// than `remaining + bias` (a format that stores "n + 1" for an
    /// optional length passes 1).
    @inlinable
    package mutating func count(bias: Int = 0) throws(ByteReadError) -> Int {
        let start = index
        let value = try varint()
        guard value <= UInt64(remaining + bias) else {
            index = start
            throw .countPastEnd(count: value, offset: start)
        }
        return Int(value)
    }

    /// The next `length` bytes, borrowed.
    @inlinable
    package mutating func take(_ length: Int) throws(ByteReadError) -> UnsafeRawBufferPointer {
        guard length >= 0, length <= remaining else { throw .truncated(offset: index) }
        index += length
        return UnsafeRawBufferPointer(rebasing: bytes[(index - length)..<index])
    }

    /// The next `length` bytes, copied.
    @inlinable
    package mutating func copy(_ length: Int) throws(ByteReadError) -> [UInt8] {
        Array(try take(length))
    }

    /// The next `length` bytes as UTF-8 text.
    package mutating func text(length: Int) throws(ByteReadError) -> String {
        let start = index
        guard let text = String(validating: try take(length), as: UTF8.self) else {
            index = start
            throw .invalidUTF8(offset: start)
        }
        return text
    }

    /// A fixed-width integer stored least significant byte first.
    @inlinable
    package mutating func littleEndian<T: FixedWidthInteger>(_: T.Type) throws(ByteReadError) -> T {
        let raw = try take(MemoryLayout<T>.size)
        return T(littleEndian: raw.loadUnaligned(as: T.self))
    }

    /// An unsigned integer of `width` bytes (at most 8), most significant
    /// byte first.
    @inlinable
    package mutating func bigEndian(width: Int) throws(ByteReadError) -> UInt64 {
        guard width <= 8 else { throw .truncated(offset: index) }
        var value: UInt64 = 0
        for byte in try take(width) { value = value << 8 | UInt64(byte) }
        return value
    }
}
