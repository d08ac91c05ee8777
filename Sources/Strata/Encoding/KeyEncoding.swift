import Foundation
import StrataEngine

/// Order-preserving encoding of typed values into byte strings, for index
/// and unique-constraint keys (FoundationDB's tuple layer is the model; the
/// code and the type codes are Strata's own).
///
/// The promise: for two values `a` and `b` of the same key type,
/// `encode(a) < encode(b)` in `memcmp` order exactly when `a < b` in Swift,
/// and a tuple of values compares element by element. `nil` sorts before
/// every value. Each element starts with a type code:
///
/// | code | value | bytes after the code |
/// |---|---|---|
/// | 0x00 | nil | none |
/// | 0x10 / 0x11 | false / true | none |
/// | 0x80–0x90 | signed integer (any width, as Int64) | 0x88: zero, no bytes; 0x88 + n: a positive value in its n significant bytes, big-endian; 0x88 − n: a negative value's ones' complement in n bytes |
/// | 0x98–0xA0 | unsigned integer (any width, as UInt64) | 0x98 + n: the value in its n significant bytes, big-endian (0x98: zero) |
/// | 0x30 | Double (Float widened; Date as seconds since 2001) | IEEE bits: sign bit flipped for positives, all bits flipped for negatives |
/// | 0x40 | String | NFC-normalized UTF-8, each 0x00 written as 0x00 0xFF, then a 0x00 terminator |
/// | 0x50 | bytes (Data, [UInt8]) | escaped and terminated like strings |
/// | 0x60 | UUID | its 16 bytes |
///
/// Floating point follows IEEE 754 totalOrder, which agrees with Swift's `<`
/// wherever `<` is defined: -0.0 sorts just before 0.0 (Swift calls them
/// equal), and NaN sorts after +infinity (negative-signed NaN before
/// -infinity); Swift leaves NaN unordered. Strings are normalized to NFC
/// first, because Swift compares strings by canonical equivalence: two
/// strings Swift calls equal encode to the same bytes, and decoding returns
/// the NFC form (equal to the original under `==`).
///
/// Integers take as many bytes as their value needs (FoundationDB's
/// scheme): an index of small numbers, or the row id that ends every index
/// key, costs 2–4 bytes instead of 9. The code says the length, so a
/// longer positive value (a larger code) sorts after a shorter one, and a
/// longer negative one (a smaller code) before. Stores written before this
/// encoding used code 0x20 (signed) and 0x21 (unsigned) followed by 8
/// bytes; `decode` still reads them, and opening such a store writable
/// rewrites its keys once (`KeyFormat`). Relationship trees keep that
/// fixed form (`PairKey`).
public enum KeyEncoding {
    /// One value of a key.
    public enum Element: Hashable, Sendable {
        /// No value (`nil`); sorts before every other element.
        case null
        /// A Bool.
        case bool(Bool)
        /// A signed integer of any width, widened to `Int64`.
        case int(Int64)
        /// An unsigned integer of any width, widened to `UInt64`.
        case uint(UInt64)
        /// A floating-point number: a `Float` widened, a `Date` as seconds
        /// since 2001.
        case double(Double)
        /// A string; it is encoded in its NFC form.
        case string(String)
        /// A byte string (`Data`, `[UInt8]`).
        case bytes([UInt8])
        /// A UUID, encoded as its 16 bytes.
        case uuid(UUID)

        /// Equality on doubles is bitwise here, so that -0.0 and NaN
        /// round-trip checks are exact.
        public static func == (a: Element, b: Element) -> Bool {
            switch (a, b) {
            case (.null, .null): return true
            case (.bool(let x), .bool(let y)): return x == y
            case (.int(let x), .int(let y)): return x == y
            case (.uint(let x), .uint(let y)): return x == y
            case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
            case (.string(let x), .string(let y)): return x == y
            case (.bytes(let x), .bytes(let y)): return x == y
            case (.uuid(let x), .uuid(let y)): return x == y
            default: return false
            }
        }

        /// Hashes doubles by their bits, as `==` compares them.
        public func hash(into hasher: inout Hasher) {
            switch self {
            case .null: hasher.combine(0)
            case .bool(let x): hasher.combine(x)
            case .int(let x): hasher.combine(x)
            case .uint(let x): hasher.combine(x)
            case .double(let x): hasher.combine(x.bitPattern)
            case .string(let x): hasher.combine(x)
            case .bytes(let x): hasher.combine(x)
            case .uuid(let x): hasher.combine(x)
            }
        }
    }

    /// A key that cannot be decoded: the bytes came from a damaged index
    /// entry, or were not made by `encode`.
    public struct DecodingError: Error, Equatable, CustomStringConvertible {
        /// The position in the key's bytes where decoding failed.
        public var offset: Int
        /// What is wrong with the bytes there.
        public var reason: String
        /// The position and the reason, on one line.
        public var description: String { "undecodable key at byte \(offset): \(reason)" }
    }

    /// Encodes a tuple of elements.
    public static func encode(_ elements: [Element]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(elements.count * 10)
        for element in elements { append(element, to: &out) }
        return out
    }

    /// Appends one element.
    public static func append(_ element: Element, to out: inout [UInt8]) {
        if let (code, word, count) = fixed(element) {
            withUnsafeTemporaryAllocation(byteCount: maxFixedCount, alignment: 8) { buffer in
                guard let base = buffer.baseAddress else { return }
                store(code: code, word: word, at: base)
                out.append(contentsOf: UnsafeRawBufferPointer(start: base, count: count))
            }
            return
        }
        switch element {
        case .null, .bool, .int, .uint, .double:
            break
        case .string(let v):
            out.append(0x40)
            // ASCII text is already in NFC; only the rest pays for
            // normalization.
            if v.utf8.allSatisfy({ $0 < 0x80 }) {
                appendEscaped(v.utf8, to: &out)
            } else {
                appendEscaped(v.precomposedStringWithCanonicalMapping.utf8, to: &out)
            }
        case .bytes(let v):
            out.append(0x50)
            appendEscaped(v, to: &out)
        case .uuid(let v):
            out.append(0x60)
            withUnsafeBytes(of: v.uuid) { out.append(contentsOf: $0) }
        }
    }

    /// Decodes a tuple made by `encode`; throws ``DecodingError`` on any
    /// other bytes (never traps).
    public static func decode(_ bytes: [UInt8]) throws -> [Element] {
        try bytes.withUnsafeBytes { raw in
            var input = ByteReader(raw)
            return try decode(&input)
        }
    }

    private static func decode(_ input: inout ByteReader) throws -> [Element] {
        var result: [Element] = []
        func fixed(_ count: Int) throws -> UInt64 {
            do {
                return try input.bigEndian(width: count)
            } catch {
                throw DecodingError(offset: error.offset, reason: "needs \(count) bytes, \(input.remaining) left")
            }
        }
        func escaped() throws -> [UInt8] {
            var out: [UInt8] = []
            do {
                while true {
                    let b = try input.byte()
                    if b != 0 {
                        out.append(b)
                    } else if input.remaining > 0, input.bytes[input.index] == 0xFF {
                        out.append(0)
                        input.index += 1
                    } else {
                        return out
                    }
                }
            } catch {
                throw DecodingError(offset: error.offset, reason: "unterminated string or bytes")
            }
        }
        while !input.isAtEnd {
            let code = try input.byte()
            switch code {
            case 0x00: result.append(.null)
            case 0x10: result.append(.bool(false))
            case 0x11: result.append(.bool(true))
            case 0x20: result.append(.int(Int64(bitPattern: try fixed(8) ^ (1 << 63))))
            case 0x21: result.append(.uint(try fixed(8)))
            case 0x80...0x90:
                let count = Int(code) - 0x88
                if count >= 0 {
                    let value = try fixed(count)
                    guard count == 0 || value >> (8 * (count - 1)) != 0, value <= UInt64(Int64.max) else {
                        throw DecodingError(offset: input.index - count - 1, reason: "integer not in its shortest form")
                    }
                    result.append(.int(Int64(value)))
                } else {
                    let complement = try fixed(-count)
                    let magnitude = ~complement & (UInt64.max >> (64 + 8 * count))
                    guard magnitude >> (8 * (-count - 1)) != 0, magnitude <= 1 << 63 else {
                        throw DecodingError(offset: input.index + count - 1, reason: "integer not in its shortest form")
                    }
                    result.append(.int(Int64(bitPattern: 0 &- magnitude)))
                }
            case 0x98...0xA0:
                let count = Int(code) - 0x98
                let value = try fixed(count)
                guard count == 0 || value >> (8 * (count - 1)) != 0 else {
                    throw DecodingError(offset: input.index - count - 1, reason: "integer not in its shortest form")
                }
                result.append(.uint(value))
            case 0x30:
                let e = try fixed(8)
                result.append(.double(Double(bitPattern: e & (1 << 63) != 0 ? e ^ (1 << 63) : ~e)))
            case 0x40:
                let utf8 = try escaped()
                guard let s = String(validating: utf8, as: UTF8.self) else {
                    throw DecodingError(offset: input.index, reason: "string is not valid UTF-8")
                }
                result.append(.string(s))
            case 0x50: result.append(.bytes(try escaped()))
            case 0x60:
                guard input.remaining >= 16 else { throw DecodingError(offset: input.index, reason: "truncated UUID") }
                let b = try input.copy(16)
                result.append(
                    .uuid(
                        UUID(
                            uuid: (
                                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                                b[15]
                            ))))
            default:
                throw DecodingError(offset: input.index - 1, reason: "unknown type code \(code)")
            }
        }
        return result
    }

    /// An element of at most 9 bytes (nil, a Bool, an integer, a Double) as
    /// a sort code and a word that order it as the element orders: the
    /// legacy code (0x20 signed, 0x21 unsigned) with the integer in 8
    /// bytes (sign bit flipped), the code alone (word zero) for nil and
    /// Bools. Its encoded length (``count(code:word:)``) follows; nil for
    /// strings, bytes and UUIDs. ``store(code:word:at:)`` writes the
    /// element's bytes (the compact form for integers).
    @inline(__always) static func fixed(_ element: Element) -> (code: UInt8, word: UInt64, count: Int)? {
        let (code, word): (UInt8, UInt64)
        switch element {
        case .null: (code, word) = (0x00, 0)
        case .bool(let v): (code, word) = (v ? 0x11 : 0x10, 0)
        case .int(let v): (code, word) = signed(v)
        case .uint(let v): (code, word) = (0x21, v)
        case .double(let v): (code, word) = (0x30, totalOrderBits(v))
        case .string, .bytes, .uuid: return nil
        }
        return (code, word, count(code: code, word: word))
    }

    /// A signed integer's type code and word (sign bit flipped).
    @inline(__always) static func signed(_ v: Int64) -> (code: UInt8, word: UInt64) {
        (0x20, UInt64(bitPattern: v) ^ (1 << 63))
    }

    /// The most bytes an element of ``fixed(_:)`` encodes to.
    static let maxFixedCount = 9

    /// The encoded length of the element with sort code `code` and word
    /// `word` (see ``fixed(_:)``): 1 for nil and Bools, 9 for a Double,
    /// 1–9 for an integer (the code and its significant bytes).
    @inline(__always) static func count(code: UInt8, word: UInt64) -> Int {
        switch code {
        case 0x20: return 1 + significantBytes(signedMagnitudeBits(word))
        case 0x21: return 1 + significantBytes(word)
        case 0x30: return 9
        default: return 1
        }
    }

    /// Writes the element with sort code `code` and word `word` (see
    /// ``fixed(_:)``) at `target`, in its encoded form, and returns its
    /// length.
    @discardableResult @inline(__always)
    static func store(code: UInt8, word: UInt64, at target: UnsafeMutableRawPointer) -> Int {
        switch code {
        case 0x20:
            // Sign bit flipped: set for zero and positives.
            let negative = word >> 63 == 0
            let value = signedMagnitudeBits(word)
            let n = significantBytes(value)
            target.storeBytes(of: negative ? 0x88 - UInt8(n) : 0x88 + UInt8(n), as: UInt8.self)
            storeSignificant(negative ? ~value : value, n, at: target + 1)
            return 1 + n
        case 0x21:
            let n = significantBytes(word)
            target.storeBytes(of: 0x98 + UInt8(n), as: UInt8.self)
            storeSignificant(word, n, at: target + 1)
            return 1 + n
        case 0x30:
            target.storeBytes(of: code, as: UInt8.self)
            target.storeBytes(of: word.bigEndian, toByteOffset: 1, as: UInt64.self)
            return 9
        default:
            target.storeBytes(of: code, as: UInt8.self)
            return 1
        }
    }

    /// The magnitude of the signed integer whose sort word is `word`: the
    /// value for zero and positives, its negation for negatives (2^63 for
    /// `Int64.min`).
    @inline(__always) private static func signedMagnitudeBits(_ word: UInt64) -> UInt64 {
        let value = Int64(bitPattern: word ^ (1 << 63))
        return value < 0 ? 0 &- UInt64(bitPattern: value) : UInt64(value)
    }

    /// The bytes `value` needs, big-endian without leading zeros (0 for 0).
    @inline(__always) static func significantBytes(_ value: UInt64) -> Int { (64 - value.leadingZeroBitCount + 7) / 8 }

    /// The low `count` bytes of `value`, big-endian, at `target`.
    @inline(__always) private static func storeSignificant(_ value: UInt64, _ count: Int, at target: UnsafeMutableRawPointer) {
        var shift = 8 * (count - 1)
        for index in 0..<count {
            target.storeBytes(of: UInt8(truncatingIfNeeded: value >> UInt64(shift)), toByteOffset: index, as: UInt8.self)
            shift -= 8
        }
    }

    /// The bits a Double is encoded with: as unsigned integers they sort
    /// in IEEE 754 totalOrder (sign bit flipped for positives, every bit
    /// flipped for negatives). Sorts compare doubles by these too, so that
    /// a sort through an index and a sort in memory agree.
    @inline(__always) static func totalOrderBits(_ value: Double) -> UInt64 {
        let bits = value.bitPattern
        return bits & (1 << 63) == 0 ? bits ^ (1 << 63) : ~bits
    }

    private static func appendEscaped(_ bytes: some Sequence<UInt8>, to out: inout [UInt8]) {
        for b in bytes {
            out.append(b)
            if b == 0 { out.append(0xFF) }
        }
        out.append(0x00)
    }
}

extension KeyEncoding.Element: CustomStringConvertible {
    /// The element as errors, `explain` and the `strata` tool show it:
    /// `nil`, a number or Bool as Swift prints it, a string in quotes,
    /// bytes by their count (`<16 bytes>`), a UUID in its usual form.
    public var description: String {
        switch self {
        case .null: return "nil"
        case .bool(let value): return "\(value)"
        case .int(let value): return "\(value)"
        case .uint(let value): return "\(value)"
        case .double(let value): return "\(value)"
        case .string(let value): return "\"\(value)\""
        case .bytes(let value): return "<\(value.count) bytes>"
        case .uuid(let value): return value.uuidString
        }
    }

    /// A tuple of elements: `(a, b)`.
    static func describe(_ elements: [Self]) -> String {
        "(" + elements.map(\.description).joined(separator: ", ") + ")"
    }

    /// A Date, as seconds since 2001-01-01 (its `timeIntervalSinceReferenceDate`).
    public static func date(_ date: Date) -> Self { .double(date.timeIntervalSinceReferenceDate) }
    /// A Float, widened exactly to Double.
    public static func float(_ value: Float) -> Self { .double(Double(value)) }
}
