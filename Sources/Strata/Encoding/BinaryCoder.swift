// Over 500 lines: the encoder and decoder of one binary format, kept
// together so that they cannot drift apart.

/// A compact, self-describing binary format for Codable values stored in
/// records: structs, Codable enums, arrays, dictionaries, nested to any
/// depth (decoding stops at ``maximumDepth`` so damaged bytes cannot
/// exhaust the stack).
///
/// Each value starts with a type byte: 0 nil, 1 false, 2 true, 3 signed
/// integer (zigzag varint), 4 unsigned integer (varint), 5 Double (8 bytes),
/// 6 Float (4 bytes), 7 string (varint length, UTF-8), 8 array (varint
/// count, values), 9 keyed (varint count, then key string and value), 10
/// bytes (varint length, bytes; used for `Data`).
enum BinaryValue {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case float(Float)
    case string(String)
    case bytes([UInt8])
    case array(ArrayNode)
    case keyed(KeyedNode)

    final class ArrayNode {
        var items: [BinaryValue] = []
    }

    final class KeyedNode {
        var keys: [String] = []
        var values: [BinaryValue] = []
        private var index: [String: Int]?

        func set(_ value: BinaryValue, for key: String) {
            if let i = position(of: key) {
                values[i] = value
            } else {
                keys.append(key)
                values.append(value)
                index = nil
            }
        }

        func position(of key: String) -> Int? {
            if keys.count <= 8 { return keys.firstIndex(of: key) }
            if index == nil {
                index = Dictionary(keys.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
            }
            return index?[key]
        }

        func value(for key: String) -> BinaryValue? { position(of: key).map { values[$0] } }
    }

    var typeName: String {
        switch self {
        case .null: return "nil"
        case .bool: return "Bool"
        case .int: return "signed integer"
        case .uint: return "unsigned integer"
        case .double: return "Double"
        case .float: return "Float"
        case .string: return "String"
        case .bytes: return "bytes"
        case .array: return "array"
        case .keyed: return "keyed container"
        }
    }
}

// MARK: - Encoding

/// Encodes a Codable value to the binary format.
public enum _BinaryEncoder {
    package static func encode<T: Encodable>(_ value: T) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        let tree: BinaryValue
        do {
            tree = try box(value, path: [])
        } catch {
            // Encoding into an in-memory tree cannot fail; a value whose own
            // encode(to:) throws is stored as nil.
            tree = .null
        }
        write(tree, to: &out)
        return out
    }

    static func box<T: Encodable>(_ value: T, path: [any CodingKey]) throws -> BinaryValue {
        switch value {
        case let v as String: return .string(v)
        case let v as Int: return .int(Int64(v))
        case let v as Double: return .double(v)
        case let v as Bool: return .bool(v)
        case let v as Data: return .bytes([UInt8](v))
        default:
            let encoder = TreeEncoder(path: path)
            try value.encode(to: encoder)
            return encoder.value ?? .keyed(BinaryValue.KeyedNode())
        }
    }

    static func write(_ value: BinaryValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(0)
        case .bool(let b): out.append(b ? 2 : 1)
        case .int(let v):
            out.append(3)
            Varint.append(UInt64(bitPattern: (v << 1) ^ (v >> 63)), to: &out)
        case .uint(let v):
            out.append(4)
            Varint.append(v, to: &out)
        case .double(let v):
            out.append(5)
            withUnsafeBytes(of: v.bitPattern.littleEndian) { out.append(contentsOf: $0) }
        case .float(let v):
            out.append(6)
            withUnsafeBytes(of: v.bitPattern.littleEndian) { out.append(contentsOf: $0) }
        case .string(let s):
            out.append(7)
            string(s, to: &out)
        case .bytes(let b):
            out.append(10)
            Varint.append(UInt64(b.count), to: &out)
            out.append(contentsOf: b)
        case .array(let node):
            out.append(8)
            Varint.append(UInt64(node.items.count), to: &out)
            for item in node.items { write(item, to: &out) }
        case .keyed(let node):
            out.append(9)
            Varint.append(UInt64(node.keys.count), to: &out)
            for (key, item) in zip(node.keys, node.values) {
                string(key, to: &out)
                write(item, to: &out)
            }
        }
    }

    static func string(_ s: String, to out: inout [UInt8]) {
        let utf8 = s.utf8
        Varint.append(UInt64(utf8.count), to: &out)
        out.append(contentsOf: utf8)
    }
}

/// An `Encoder` that builds a ``BinaryValue`` tree.
private final class TreeEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var value: BinaryValue?

    init(path: [any CodingKey]) { codingPath = path }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let node: BinaryValue.KeyedNode
        if case .keyed(let existing) = value {
            node = existing
        } else {
            node = BinaryValue.KeyedNode()
            value = .keyed(node)
        }
        return KeyedEncodingContainer(KeyedEncoder<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let node: BinaryValue.ArrayNode
        if case .array(let existing) = value {
            node = existing
        } else {
            node = BinaryValue.ArrayNode()
            value = .array(node)
        }
        return UnkeyedEncoder(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleEncoder(encoder: self) }
}

private struct KeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: BinaryValue.KeyedNode
    let codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws { node.set(.null, for: key.stringValue) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        node.set(try _BinaryEncoder.box(value, path: codingPath + [key]), for: key.stringValue)
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        let child = BinaryValue.KeyedNode()
        node.set(.keyed(child), for: key.stringValue)
        return KeyedEncodingContainer(KeyedEncoder<NestedKey>(node: child, codingPath: codingPath + [key]))
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = BinaryValue.ArrayNode()
        node.set(.array(child), for: key.stringValue)
        return UnkeyedEncoder(node: child, codingPath: codingPath + [key])
    }
    mutating func superEncoder() -> any Encoder { SuperEncoder(parent: node, key: "super", codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        SuperEncoder(parent: node, key: key.stringValue, codingPath: codingPath + [key])
    }
}

private struct UnkeyedEncoder: UnkeyedEncodingContainer {
    let node: BinaryValue.ArrayNode
    let codingPath: [any CodingKey]
    var count: Int { node.items.count }

    mutating func encodeNil() throws { node.items.append(.null) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        node.items.append(try _BinaryEncoder.box(value, path: codingPath + [IndexKey(count)]))
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = BinaryValue.KeyedNode()
        node.items.append(.keyed(child))
        return KeyedEncodingContainer(KeyedEncoder<NestedKey>(node: child, codingPath: codingPath + [IndexKey(count - 1)]))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = BinaryValue.ArrayNode()
        node.items.append(.array(child))
        return UnkeyedEncoder(node: child, codingPath: codingPath + [IndexKey(count - 1)])
    }
    mutating func superEncoder() -> any Encoder {
        let holder = BinaryValue.KeyedNode()
        node.items.append(.keyed(holder))
        return SuperEncoder(parent: holder, key: "super", codingPath: codingPath)
    }
}

private struct SingleEncoder: SingleValueEncodingContainer {
    let encoder: TreeEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil() throws { encoder.value = .null }
    mutating func encode(_ value: Bool) throws { encoder.value = .bool(value) }
    mutating func encode(_ value: String) throws { encoder.value = .string(value) }
    mutating func encode(_ value: Double) throws { encoder.value = .double(value) }
    mutating func encode(_ value: Float) throws { encoder.value = .float(value) }
    mutating func encode(_ value: Int) throws { encoder.value = .int(Int64(value)) }
    mutating func encode(_ value: Int8) throws { encoder.value = .int(Int64(value)) }
    mutating func encode(_ value: Int16) throws { encoder.value = .int(Int64(value)) }
    mutating func encode(_ value: Int32) throws { encoder.value = .int(Int64(value)) }
    mutating func encode(_ value: Int64) throws { encoder.value = .int(value) }
    mutating func encode(_ value: UInt) throws { encoder.value = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { encoder.value = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { encoder.value = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { encoder.value = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { encoder.value = .uint(value) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        encoder.value = try _BinaryEncoder.box(value, path: codingPath)
    }
}

/// The encoder a class's `super.encode(to:)` writes through: its value
/// lands under `key` in the parent keyed node.
private final class SuperEncoder: Encoder {
    let parent: BinaryValue.KeyedNode
    let key: String
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    private let inner: TreeEncoder

    init(parent: BinaryValue.KeyedNode, key: String, codingPath: [any CodingKey]) {
        self.parent = parent
        self.key = key
        self.codingPath = codingPath
        self.inner = TreeEncoder(path: codingPath)
        parent.set(.null, for: key)
    }

    deinit { parent.set(inner.value ?? .null, for: key) }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        defer { parent.set(inner.value ?? .null, for: key) }
        return inner.container(keyedBy: type)
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        defer { parent.set(inner.value ?? .null, for: key) }
        return inner.unkeyedContainer()
    }
    func singleValueContainer() -> any SingleValueEncodingContainer { inner.singleValueContainer() }
}

struct IndexKey: CodingKey {
    var stringValue: String { "\(index)" }
    var intValue: Int? { index }
    let index: Int
    init(_ index: Int) { self.index = index }
    init?(stringValue: String) {
        guard let i = Int(stringValue) else { return nil }
        index = i
    }
    init?(intValue: Int) { index = intValue }
}

// MARK: - Decoding

/// Decodes the binary format; the bytes are untrusted.
public enum _BinaryDecoder {
    /// Bytes that are not a well-formed value.
    struct Failure: Error {
        var reason: String
    }

    static let maximumDepth = 64

    package static func decode<T: Decodable>(_ type: T.Type, from bytes: ArraySlice<UInt8>) throws -> T {
        let tree = try bytes.withUnsafeBytes { raw in
            var parser = Parser(input: ByteReader(raw))
            let tree = try parser.value(depth: 0)
            guard parser.input.isAtEnd else { throw Failure(reason: "\(parser.input.remaining) trailing bytes") }
            return tree
        }
        return try unbox(tree, as: T.self, path: [])
    }

    static func unbox<T: Decodable>(_ value: BinaryValue, as type: T.Type, path: [any CodingKey]) throws -> T {
        if T.self == Data.self, case .bytes(let b) = value, let data = Data(b) as? T { return data }
        return try T(from: TreeDecoder(value: value, path: path))
    }

    /// Reads values through the bounded reader, which also refuses a count
    /// the remaining bytes could not hold (each item takes at least one
    /// byte), so a forged count cannot allocate gigabytes.
    struct Parser {
        var input: ByteReader

        mutating func byte() throws -> UInt8 {
            do { return try input.byte() } catch { throw failure(error) }
        }

        mutating func varint() throws -> UInt64 {
            do { return try input.varint() } catch { throw failure(error) }
        }

        mutating func count() throws -> Int {
            do { return try input.count() } catch { throw failure(error) }
        }

        mutating func string() throws -> String {
            do { return try input.text(length: try input.count()) } catch { throw failure(error) }
        }

        mutating func bytes() throws -> [UInt8] {
            do { return try input.copy(try input.count()) } catch { throw failure(error) }
        }

        mutating func fixed<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
            do { return try input.littleEndian(T.self) } catch { throw failure(error) }
        }

        private func failure(_ error: ByteReadError) -> Failure {
            Failure(reason: "\(error) at byte \(error.offset)")
        }

        mutating func value(depth: Int) throws -> BinaryValue {
            guard depth < maximumDepth else { throw Failure(reason: "nested deeper than \(maximumDepth)") }
            switch try byte() {
            case 0: return .null
            case 1: return .bool(false)
            case 2: return .bool(true)
            case 3:
                let raw = try varint()
                return .int(Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1))))
            case 4: return .uint(try varint())
            case 5: return .double(Double(bitPattern: try fixed(UInt64.self)))
            case 6: return .float(Float(bitPattern: try fixed(UInt32.self)))
            case 7: return .string(try string())
            case 8:
                let node = BinaryValue.ArrayNode()
                let n = try count()
                node.items.reserveCapacity(n)
                for _ in 0..<n { node.items.append(try value(depth: depth + 1)) }
                return .array(node)
            case 9:
                let node = BinaryValue.KeyedNode()
                let n = try count()
                for _ in 0..<n {
                    let key = try string()
                    node.set(try value(depth: depth + 1), for: key)
                }
                return .keyed(node)
            case 10: return .bytes(try bytes())
            case let other: throw Failure(reason: "unknown value type \(other)")
            }
        }
    }
}

private struct TreeDecoder: Decoder {
    let value: BinaryValue
    let path: [any CodingKey]
    var codingPath: [any CodingKey] { path }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(value: BinaryValue, path: [any CodingKey]) {
        self.value = value
        self.path = path
    }

    func mismatch(_ expected: Any.Type, _ found: BinaryValue) -> DecodingError {
        .typeMismatch(expected, .init(codingPath: path, debugDescription: "found \(found.typeName)"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .keyed(let node) = value else { throw mismatch([String: Any].self, value) }
        return KeyedDecodingContainer(KeyedDecoder<Key>(node: node, codingPath: path))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let node) = value else { throw mismatch([Any].self, value) }
        return UnkeyedDecoder(node: node, codingPath: path)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleDecoder(decoder: self) }
}

private struct KeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let node: BinaryValue.KeyedNode
    let codingPath: [any CodingKey]

    var allKeys: [Key] { node.keys.compactMap { Key(stringValue: $0) } }
    func contains(_ key: Key) -> Bool { node.position(of: key.stringValue) != nil }

    func child(_ key: Key) throws -> BinaryValue {
        guard let value = node.value(for: key.stringValue) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no value"))
        }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        if case .null = try child(key) { return true }
        return false
    }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try _BinaryDecoder.unbox(try child(key), as: T.self, path: codingPath + [key])
    }
    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try TreeDecoder(value: try child(key), path: codingPath + [key]).container(keyedBy: type)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try TreeDecoder(value: try child(key), path: codingPath + [key]).unkeyedContainer()
    }
    func superDecoder() throws -> any Decoder {
        TreeDecoder(value: node.value(for: "super") ?? .null, path: codingPath)
    }
    func superDecoder(forKey key: Key) throws -> any Decoder {
        TreeDecoder(value: node.value(for: key.stringValue) ?? .null, path: codingPath + [key])
    }
}

private struct UnkeyedDecoder: UnkeyedDecodingContainer {
    let node: BinaryValue.ArrayNode
    let codingPath: [any CodingKey]
    var currentIndex = 0
    var count: Int? { node.items.count }
    var isAtEnd: Bool { currentIndex >= node.items.count }

    init(node: BinaryValue.ArrayNode, codingPath: [any CodingKey]) {
        self.node = node
        self.codingPath = codingPath
    }

    mutating func next() throws -> BinaryValue {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any.self, .init(codingPath: codingPath, debugDescription: "array has only \(node.items.count) items"))
        }
        defer { currentIndex += 1 }
        return node.items[currentIndex]
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, case .null = node.items[currentIndex] else { return false }
        currentIndex += 1
        return true
    }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let path = codingPath + [IndexKey(currentIndex)]
        return try _BinaryDecoder.unbox(try next(), as: T.self, path: path)
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        let path = codingPath + [IndexKey(currentIndex)]
        return try TreeDecoder(value: try next(), path: path).container(keyedBy: type)
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let path = codingPath + [IndexKey(currentIndex)]
        return try TreeDecoder(value: try next(), path: path).unkeyedContainer()
    }
    mutating func superDecoder() throws -> any Decoder {
        let path = codingPath + [IndexKey(currentIndex)]
        let holder = try next()
        guard case .keyed(let node) = holder else { return TreeDecoder(value: .null, path: path) }
        return TreeDecoder(value: node.value(for: "super") ?? .null, path: path)
    }
}

private struct SingleDecoder: SingleValueDecodingContainer {
    let decoder: TreeDecoder
    var codingPath: [any CodingKey] { decoder.path }
    var value: BinaryValue { decoder.value }

    func decodeNil() -> Bool {
        if case .null = value { return true }
        return false
    }
    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let b) = value else { throw decoder.mismatch(type, value) }
        return b
    }
    func decode(_ type: String.Type) throws -> String {
        guard case .string(let s) = value else { throw decoder.mismatch(type, value) }
        return s
    }
    func decode(_ type: Double.Type) throws -> Double {
        switch value {
        case .double(let d): return d
        case .float(let f): return Double(f)
        default: throw decoder.mismatch(type, value)
        }
    }
    func decode(_ type: Float.Type) throws -> Float {
        switch value {
        case .float(let f): return f
        case .double(let d): return Float(d)
        default: throw decoder.mismatch(type, value)
        }
    }
    func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        let result: T?
        switch value {
        case .int(let v): result = T(exactly: v)
        case .uint(let v): result = T(exactly: v)
        default: throw decoder.mismatch(type, value)
        }
        guard let result else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "does not fit \(T.self)"))
        }
        return result
    }
    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try _BinaryDecoder.unbox(value, as: T.self, path: codingPath)
    }
}
