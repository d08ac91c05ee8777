import Foundation

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
/// | 0x20 | signed integer (any width, as Int64) | 8 bytes big-endian, sign bit flipped |
/// | 0x21 | unsigned integer (any width, as UInt64) | 8 bytes big-endian |
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
            out.append(code)
            if count > 1 { appendBigEndian(word, to: &out) }
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
        var result: [Element] = []
        var i = 0
        func fixed(_ count: Int) throws -> UInt64 {
            guard i + count <= bytes.count else {
                throw DecodingError(offset: i, reason: "needs \(count) bytes, \(bytes.count - i) left")
            }
            var v: UInt64 = 0
            for j in 0..<count { v = v << 8 | UInt64(bytes[i + j]) }
            i += count
            return v
        }
        func escaped() throws -> [UInt8] {
            var out: [UInt8] = []
            while true {
                guard i < bytes.count else { throw DecodingError(offset: i, reason: "unterminated string or bytes") }
                let b = bytes[i]
                i += 1
                if b != 0 {
                    out.append(b)
                } else if i < bytes.count && bytes[i] == 0xFF {
                    out.append(0)
                    i += 1
                } else {
                    return out
                }
            }
        }
        while i < bytes.count {
            let code = bytes[i]
            i += 1
            switch code {
            case 0x00: result.append(.null)
            case 0x10: result.append(.bool(false))
            case 0x11: result.append(.bool(true))
            case 0x20: result.append(.int(Int64(bitPattern: try fixed(8) ^ (1 << 63))))
            case 0x21: result.append(.uint(try fixed(8)))
            case 0x30:
                let e = try fixed(8)
                result.append(.double(Double(bitPattern: e & (1 << 63) != 0 ? e ^ (1 << 63) : ~e)))
            case 0x40:
                let utf8 = try escaped()
                guard let s = String(validating: utf8, as: UTF8.self) else {
                    throw DecodingError(offset: i, reason: "string is not valid UTF-8")
                }
                result.append(.string(s))
            case 0x50: result.append(.bytes(try escaped()))
            case 0x60:
                guard i + 16 <= bytes.count else { throw DecodingError(offset: i, reason: "truncated UUID") }
                let b = Array(bytes[i..<(i + 16)])
                i += 16
                result.append(
                    .uuid(
                        UUID(
                            uuid: (
                                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                                b[15]
                            ))))
            default:
                throw DecodingError(offset: i - 1, reason: "unknown type code \(code)")
            }
        }
        return result
    }

    /// An element that encodes to a fixed width (nil, a Bool, an integer,
    /// a Double) as its type code, the 8 bytes after the code as a
    /// big-endian word (zero for nil and Bools, which have none), and its
    /// encoded length (1 or 9); nil for strings, bytes and UUIDs.
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
        return (code, word, fixedCount(code: code))
    }

    /// A signed integer's type code and word (sign bit flipped).
    @inline(__always) static func signed(_ v: Int64) -> (code: UInt8, word: UInt64) {
        (0x20, UInt64(bitPattern: v) ^ (1 << 63))
    }

    /// The encoded length of a fixed-width element with type code `code`:
    /// 1 for nil and Bools, 9 for the codes followed by a word.
    @inline(__always) static func fixedCount(code: UInt8) -> Int { code >= 0x20 ? 9 : 1 }

    /// Writes a fixed-width element (see ``fixed(_:)``) at `target` and
    /// returns its length.
    @discardableResult @inline(__always)
    static func store(code: UInt8, word: UInt64, at target: UnsafeMutableRawPointer) -> Int {
        target.storeBytes(of: code, as: UInt8.self)
        let count = fixedCount(code: code)
        if count > 1 { target.storeBytes(of: word.bigEndian, toByteOffset: 1, as: UInt64.self) }
        return count
    }

    /// The bits a Double is encoded with: as unsigned integers they sort
    /// in IEEE 754 totalOrder (sign bit flipped for positives, every bit
    /// flipped for negatives). Sorts compare doubles by these too, so that
    /// a sort through an index and a sort in memory agree.
    @inline(__always) static func totalOrderBits(_ value: Double) -> UInt64 {
        let bits = value.bitPattern
        return bits & (1 << 63) == 0 ? bits ^ (1 << 63) : ~bits
    }

    /// The 8 bytes of `v`, most significant first, in one append (eight
    /// appends cost eight capacity and uniqueness checks).
    private static func appendBigEndian(_ v: UInt64, to out: inout [UInt8]) {
        withUnsafeBytes(of: v.bigEndian) { out.append(contentsOf: $0) }
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
