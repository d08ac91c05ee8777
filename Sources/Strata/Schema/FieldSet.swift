/// A set of a model's field numbers (its persisted properties, in
/// declaration order): the fields a context changed since the last save,
/// or the fields another context's save wrote. Generated code uses it to
/// load some fields of a record and leave the others as they are.
///
/// The first 64 fields are bits of one word, so the common model costs no
/// allocation; fields past 63 go to further words.
public struct _FieldSet: Hashable, Sendable, CustomStringConvertible {
    private var low: UInt64 = 0
    private var high: [UInt64] = []

    /// The empty set.
    public init() {}

    /// Fields `0..<count`.
    init(all count: Int) {
        for field in 0..<max(count, 0) { insert(field) }
    }

    package init(_ fields: some Sequence<Int>) {
        for field in fields { insert(field) }
    }

    /// True when the set holds no field.
    public var isEmpty: Bool { low == 0 && high.allSatisfy { $0 == 0 } }

    /// The set's one field, when it holds exactly one and it is below 64;
    /// nil otherwise.
    var onlyField: Int? {
        guard low != 0, low & (low &- 1) == 0, high.allSatisfy({ $0 == 0 }) else { return nil }
        return low.trailingZeroBitCount
    }

    /// Whether the set holds field `field`; false for a negative number. Called
    /// by code the `@Model` macro generates; not meant to be called directly.
    public func contains(_ field: Int) -> Bool {
        guard field >= 0 else { return false }
        if field < 64 { return low & (1 << UInt64(field)) != 0 }
        let word = field / 64 - 1
        return word < high.count && high[word] & (1 << UInt64(field % 64)) != 0
    }

    mutating func insert(_ field: Int) {
        guard field >= 0 else { return }
        if field < 64 {
            low |= 1 << UInt64(field)
            return
        }
        let word = field / 64 - 1
        if word >= high.count { high += Array(repeating: 0, count: word + 1 - high.count) }
        high[word] |= 1 << UInt64(field % 64)
    }

    mutating func remove(_ field: Int) {
        guard field >= 0 else { return }
        if field < 64 {
            low &= ~(1 << UInt64(field))
            return
        }
        let word = field / 64 - 1
        if word < high.count { high[word] &= ~(1 << UInt64(field % 64)) }
    }

    mutating func formUnion(_ other: _FieldSet) {
        low |= other.low
        if other.high.count > high.count { high += Array(repeating: 0, count: other.high.count - high.count) }
        for word in other.high.indices { high[word] |= other.high[word] }
    }

    func subtracting(_ other: _FieldSet) -> _FieldSet {
        var result = self
        result.low &= ~other.low
        for word in result.high.indices where word < other.high.count { result.high[word] &= ~other.high[word] }
        return result
    }

    /// True when the two sets share a field.
    func intersects(_ other: _FieldSet) -> Bool {
        if low & other.low != 0 { return true }
        for word in high.indices where word < other.high.count && high[word] & other.high[word] != 0 { return true }
        return false
    }

    /// Calls `body` with each field, ascending, without an array.
    func forEachField(_ body: (Int) throws -> Void) rethrows {
        var bits = low
        while bits != 0 {
            try body(bits.trailingZeroBitCount)
            bits &= bits - 1
        }
        for (word, var bits) in high.enumerated() {
            while bits != 0 {
                try body((word + 1) * 64 + bits.trailingZeroBitCount)
                bits &= bits - 1
            }
        }
    }

    /// The fields, ascending.
    package var fields: [Int] {
        var result: [Int] = []
        forEachField { result.append($0) }
        return result
    }

    /// Two sets are equal when they hold the same fields.
    public static func == (a: _FieldSet, b: _FieldSet) -> Bool { a.fields == b.fields }
    /// Hashes the fields.
    public func hash(into hasher: inout Hasher) { hasher.combine(fields) }

    /// The fields, ascending, as an array.
    public var description: String { "\(fields)" }
}
