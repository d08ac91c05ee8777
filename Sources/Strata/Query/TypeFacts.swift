import Foundation

/// What a fetch needs to know about a type of a predicate's expression
/// tree, found by dynamic casts once per type and fact, then remembered.
///
/// A cast to an existential (`node as? any QueryNode`, `value as? any
/// _KeyElementConvertible`) costs a conformance lookup: a few thousand
/// instructions once the runtime has seen the pair, and a scan of the
/// conformances the process loaded (about 180,000 instructions) the first
/// time, failed casts included. Each fact is therefore found only when
/// asked for: a node type is asked whether it is a node, not whether it is
/// a model, an optional or a key. The first fetch of a process made 68
/// lookups and now makes 12 (callgrind, beyond a later fetch's cost:
/// 22.4M instructions, then 15.2M, of which about 11M is the runtime's
/// first scan, paid once by whichever cast comes first). The facts are
/// kept as metatypes; their static helpers cast an instance back to its
/// exact type (`as? Self`), which is a metadata comparison.
struct TypeFacts {
    let type: Any.Type

    /// The facts of `type`.
    static func of(_ type: Any.Type) -> TypeFacts { TypeFacts(type: type) }

    /// The type as a predicate node Strata translates.
    var node: (any QueryNode.Type)? { Self.nodes.remember(type) { $0 as? any QueryNode.Type } }
    /// The model type of a model, an optional model or an array of models.
    var modelType: (any PersistentModel.Type)? { Self.modelTypes.remember(type, Self.model(of:)) }
    /// How a captured value of the type becomes a query value.
    var value: ValueKind {
        Self.values.remember(type) { type in
            if let optional = type as? any OptionalValue.Type { return .optional(optional) }
            if let key = type as? any _KeyElementConvertible.Type { return .key(key) }
            if let model = type as? any PersistentModel.Type { return .model(model) }
            return .other
        }
    }
    /// Numbers, strings, dates, UUIDs, Bool and their optionals: ordered
    /// as their query values are.
    var ordersAsQueryValue: Bool { Self.ordering.remember(type, Self.orders) }
    /// A value stored as one scalar (a key element type or an enum with a
    /// raw value): its members are not readable on records.
    var isScalar: Bool {
        Self.scalars.remember(type) { $0 is any _KeyElementConvertible.Type || $0 is any RawRepresentable.Type }
    }

    enum ValueKind {
        case optional(any OptionalValue.Type)
        case key(any _KeyElementConvertible.Type)
        case model(any PersistentModel.Type)
        /// Anything else: the general conversion.
        case other
    }

    private static let nodes = FactCache<(any QueryNode.Type)?>()
    private static let modelTypes = FactCache<(any PersistentModel.Type)?>()
    private static let values = FactCache<ValueKind>()
    private static let ordering = FactCache<Bool>()
    private static let scalars = FactCache<Bool>()

    private static func model(of type: Any.Type) -> (any PersistentModel.Type)? {
        if let model = type as? any PersistentModel.Type { return model }
        if let optional = type as? any _OptionalMarker.Type { return model(of: optional._wrappedType) }
        if let array = type as? any _ArrayMarker.Type { return model(of: array._elementType) }
        return nil
    }

    private static func orders(_ type: Any.Type) -> Bool {
        if let optional = type as? any _OptionalMarker.Type { return orders(optional._wrappedType) }
        return type is any _KeyElementConvertible.Type && !(type is URL.Type)
    }
}

/// One fact of each type asked about, by the type's identity; facts are
/// metatypes and flags, never written again once found.
private final class FactCache<Fact>: @unchecked Sendable {
    private let known = Locked<[ObjectIdentifier: Fact]>([:])

    /// The fact of `type`, found by `find` the first time.
    func remember(_ type: Any.Type, _ find: (Any.Type) -> Fact) -> Fact {
        let key = ObjectIdentifier(type)
        if let fact = known.withLock({ $0[key] }) { return fact }
        let fact = find(type)
        known.withLock { $0[key] = fact }
        return fact
    }
}

extension QueryNode {
    // The facts are looked up by a value's own type, so the casts below
    // succeed; a value of another type is refused, never trapped on.

    /// The two operands of `node` when it is `&&` (of type `Self`).
    static func conjunctionOperands(of node: Any) -> (Any, Any)? { (node as? Self)?.conjunctionOperands }

    /// Translates `node`, which should be of type `Self`.
    static func convert(node: Any, _ converter: inout PredicateConversion) throws -> Converted {
        guard let typed = node as? Self else {
            throw PredicateConversion.Failure.unsupported("\(type(of: node)) is not a \(Self.self)")
        }
        return try typed.convert(&converter)
    }
}

extension OptionalValue {
    /// The wrapped value; nil for nil, or a value not of type `Self`.
    static func unwrap(_ value: Any) -> Any? { (value as? Self)?.wrappedValue }
}

extension _KeyElementConvertible {
    /// `value` as a key element; nil when it is not of type `Self`.
    static func keyElement(of value: Any) -> KeyEncoding.Element? { (value as? Self)?._keyElement }
}

extension PersistentModel {
    /// The row of model `value`; nil when it is not of type `Self`.
    static func rowID(of value: Any) -> Int64? { (value as? Self)?._strataState.rowID }
}
