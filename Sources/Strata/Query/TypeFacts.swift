import Foundation

/// What a fetch needs to know about a type of a predicate's expression
/// tree, found by dynamic casts once per type and then remembered.
///
/// A cast to an existential (`node as? any QueryNode`, `value as? any
/// _KeyElementConvertible`) costs a conformance lookup of a few thousand
/// instructions, and translating a predicate takes a dozen of them: more
/// than the rest of a point query. The facts are kept as metatypes; their
/// static helpers cast an instance back to its exact type (`as? Self`),
/// which is a metadata comparison.
struct TypeFacts: @unchecked Sendable {
    /// The type as a predicate node Strata translates.
    let node: (any QueryNode.Type)?
    /// The type as `&&`.
    let conjunction: (any ConjunctionNode.Type)?
    /// The model type of a model, an optional model or an array of models.
    let modelType: (any PersistentModel.Type)?
    /// How a captured value of the type becomes a query value.
    let value: ValueKind
    /// Numbers, strings, dates, UUIDs, Bool and their optionals: ordered
    /// as their query values are.
    let ordersAsQueryValue: Bool
    /// A value stored as one scalar (a key element type or an enum with a
    /// raw value): its members are not readable on records.
    let isScalar: Bool

    enum ValueKind {
        case optional(any OptionalValue.Type)
        case key(any _KeyElementConvertible.Type)
        case model(any PersistentModel.Type)
        /// Anything else: the general conversion.
        case other
    }

    private static let cache = Locked<[ObjectIdentifier: TypeFacts]>([:])

    /// The facts of `type`.
    static func of(_ type: Any.Type) -> TypeFacts {
        let key = ObjectIdentifier(type)
        if let known = cache.withLock({ $0[key] }) { return known }
        let facts = TypeFacts(type)
        cache.withLock { $0[key] = facts }
        return facts
    }

    private init(_ type: Any.Type) {
        node = type as? any QueryNode.Type
        conjunction = type as? any ConjunctionNode.Type
        modelType = Self.model(of: type)
        if let optional = type as? any OptionalValue.Type {
            value = .optional(optional)
        } else if let key = type as? any _KeyElementConvertible.Type {
            value = .key(key)
        } else if let model = type as? any PersistentModel.Type {
            value = .model(model)
        } else {
            value = .other
        }
        ordersAsQueryValue = Self.orders(type)
        isScalar = type is any _KeyElementConvertible.Type || type is any RawRepresentable.Type
    }

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

extension QueryNode {
    // The facts are looked up by a value's own type, so the casts below
    // succeed; a value of another type is refused, never trapped on.

    /// Translates `node`, which should be of type `Self`.
    static func convert(node: Any, _ converter: inout PredicateConversion) throws -> Converted {
        guard let typed = node as? Self else {
            throw PredicateConversion.Failure.unsupported("\(type(of: node)) is not a \(Self.self)")
        }
        return try typed.convert(&converter)
    }
}

extension ConjunctionNode {
    /// The two operands of `node`; nil when it is not of type `Self`.
    static func operands(of node: Any) -> (Any, Any)? { (node as? Self)?.operands }
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
