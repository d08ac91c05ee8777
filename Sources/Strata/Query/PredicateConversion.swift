import Foundation

// Over 500 lines: one case per expression type of Foundation's
// `#Predicate`; each is short, and they read best side by side.

/// Turns a Foundation `Predicate` into a ``QueryExpr``.
///
/// Each `PredicateExpressions` type Strata understands conforms to
/// ``QueryNode`` (the visitor Foundation's documentation recommends: the
/// tree's types are public, its evaluation is not inspectable). Key paths
/// are matched to stored properties through the metadata `@Model`
/// generates.
///
/// What is not translated falls in two kinds:
/// - forms that `Predicate.evaluate` runs safely (a regular expression, a
///   dictionary subscript, a type check, an enum compared with its own
///   `<`): a conjunct of the top-level `&&` chain made of them is dropped
///   from the translation and the whole predicate is evaluated on the
///   materialized model instead; anywhere else, the whole predicate is;
/// - forms that would trap in `Predicate.evaluate` (subscripts past the
///   end, forced casts), and forms Strata cannot read at all: the fetch
///   throws ``SwiftDataError/unsupportedPredicate`` naming the expression.
///   A predicate evaluated by Foundation must not contain integer
///   arithmetic either (Foundation traps on overflow and division by zero,
///   where Strata's own evaluator throws).
struct PredicateConversion {
    /// Why an expression was not translated.
    enum Failure: Error {
        /// `Predicate.evaluate` can run it.
        case foundationOnly(String)
        /// Nothing can run it safely.
        case unsupported(String)
    }

    /// The translation of a predicate.
    struct Result {
        /// The translated predicate, or the translated conjuncts of its
        /// top-level `&&` chain; nil when nothing was translated.
        var expression: QueryExpr?
        /// True when ``expression`` is the whole predicate; false when the
        /// predicate must also be evaluated on the model by Foundation.
        var isExact: Bool
        /// The number of variables ``expression`` binds (0 is the model).
        var variableCount: Int
    }

    let schema: Schema
    fileprivate(set) var variables: [PredicateExpressions.VariableID: (id: Int, entity: Schema.Entity?)] = [:]
    private(set) var variableCount = 1

    init(schema: Schema) { self.schema = schema }

    /// Translates `predicate` over models of `T` stored as rows of
    /// `entity` (`T`'s entity, or one of its subentities, whose rows a
    /// fetch of `T` runs over separately: type checks and casts of the
    /// fetched model are then known while translating).
    static func convert<T: PersistentModel>(_ predicate: Predicate<T>, schema: Schema, entity: Schema.Entity? = nil)
        throws -> Result
    {
        var converter = PredicateConversion(schema: schema)
        converter.variables[predicate.variable.key] = (0, entity ?? schema.entity(for: T.self))
        var parts: [QueryExpr] = []
        var isExact = true
        var pending: [Any] = [predicate.expression]
        var foundationOnly: String?
        while let node = pending.popLast() {
            if let known = TypeFacts.of(type(of: node)).node, let operands = known.conjunctionOperands(of: node) {
                pending.append(operands.1)
                pending.append(operands.0)
                continue
            }
            do {
                parts.append(try converter.convert(node).expression)
            } catch Failure.foundationOnly(let what) {
                isExact = false
                foundationOnly = foundationOnly ?? what
            } catch Failure.unsupported(let what) {
                throw SwiftDataError(.unsupportedPredicate, "\(T.self): \(what) cannot be evaluated (in \(predicate))")
            }
        }
        if let foundationOnly, let risk = Self.trapRisk(in: predicate.expression) {
            throw SwiftDataError(
                .unsupportedPredicate,
                "\(T.self): \(foundationOnly) needs Foundation's evaluation, which traps on \(risk) (in \(predicate))")
        }
        let expression = parts.isEmpty ? nil : parts.dropFirst().reduce(parts[0]) { .and($0, $1) }
        return Result(expression: expression, isExact: isExact, variableCount: converter.variableCount)
    }

    /// The first node under `expression` that Foundation's evaluation would
    /// trap on for some input (integer arithmetic, a subscript), if any.
    static func trapRisk(in expression: Any) -> String? {
        var pending: [Any] = [expression]
        while let node = pending.popLast() {
            guard let known = node as? any QueryNode else { continue }
            if let risk = known.trapRisk { return risk }
            pending.append(contentsOf: known.children)
        }
        return nil
    }

    // MARK: Used by the conformances

    /// Translates one node.
    mutating func convert(_ node: Any) throws -> Converted {
        guard let known = TypeFacts.of(type(of: node)).node else {
            throw Failure.foundationOnly("\(Self.name(of: node))")
        }
        return try known.convert(node: node, &self)
    }

    /// The entity of a model type, of an optional model or of an array of
    /// models; nil for any other type.
    func entity(of type: Any.Type) -> Schema.Entity? {
        TypeFacts.of(type).modelType.flatMap { schema.entity(forType: $0) }
    }

    /// Gives the variable `key` (bound by a closure in the predicate) a
    /// number.
    mutating func bind(_ key: PredicateExpressions.VariableID, entity: Schema.Entity?) -> Int {
        let id = variableCount
        variableCount += 1
        variables[key] = (id, entity)
        return id
    }

    func variable(_ key: PredicateExpressions.VariableID) throws -> (id: Int, entity: Schema.Entity?) {
        guard let bound = variables[key] else { throw Failure.unsupported("a variable bound outside the predicate") }
        return bound
    }

    /// A short name for an expression type (`Equal`, `KeyPath`).
    static func name(of node: Any) -> String {
        let full = "\(type(of: node))"
        let base = full.split(separator: "<").first.map(String.init) ?? full
        return base.split(separator: ".").last.map(String.init) ?? base
    }
}

/// A translated expression and, when it yields models, their entity.
struct Converted {
    var expression: QueryExpr
    var entity: Schema.Entity?

    init(_ expression: QueryExpr, entity: Schema.Entity? = nil) {
        self.expression = expression
        self.entity = entity
    }
}

/// A `PredicateExpressions` type that Strata translates.
protocol QueryNode {
    func convert(_ converter: inout PredicateConversion) throws -> Converted
    /// The node's operands (to look for trap risks).
    var children: [Any] { get }
    /// Why `Predicate.evaluate` could trap on this node, if it could.
    var trapRisk: String? { get }
    /// The two operands of `&&`, split apart at the top of a predicate;
    /// nil for every other node. (A protocol of its own for `&&` cost a
    /// failed conformance lookup for every other node type.)
    var conjunctionOperands: (Any, Any)? { get }
}

extension QueryNode {
    var trapRisk: String? { nil }
    var conjunctionOperands: (Any, Any)? { nil }
}

// MARK: - Conformances

extension PredicateExpressions.Conjunction: QueryNode {
    var conjunctionOperands: (Any, Any)? { (lhs, rhs) }
    var children: [Any] { [lhs, rhs] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        Converted(.and(try c.convert(lhs).expression, try c.convert(rhs).expression))
    }
}

extension PredicateExpressions.Disjunction: QueryNode {
    var children: [Any] { [lhs, rhs] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        Converted(.or(try c.convert(lhs).expression, try c.convert(rhs).expression))
    }
}

extension PredicateExpressions.Negation: QueryNode {
    var children: [Any] { [wrapped] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        Converted(.not(try c.convert(wrapped).expression))
    }
}

extension PredicateExpressions.Equal: QueryNode {
    var children: [Any] { [lhs, rhs] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        Converted(.compare(.equal, try c.convert(lhs).expression, try c.convert(rhs).expression))
    }
}

extension PredicateExpressions.NotEqual: QueryNode {
    var children: [Any] { [lhs, rhs] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        Converted(.compare(.notEqual, try c.convert(lhs).expression, try c.convert(rhs).expression))
    }
}

/// Values of `type` order the same way as their query values: numbers,
/// strings, dates, UUIDs, booleans, and optionals of these. An enum or a
/// struct orders by its own `<`, which its stored raw value or encoding
/// need not follow, so a comparison of such values is left to Foundation.
private func ordersAsQueryValue(_ type: Any.Type) -> Bool { TypeFacts.of(type).ordersAsQueryValue }

extension PredicateExpressions.Comparison: QueryNode {
    var children: [Any] { [lhs, rhs] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        guard ordersAsQueryValue(LHS.Output.self) else {
            throw PredicateConversion.Failure.foundationOnly("a comparison of \(LHS.Output.self) values")
        }
        let operation: QueryExpr.ComparisonOperator
        switch op {
        case .lessThan: operation = .less
        case .lessThanOrEqual: operation = .lessOrEqual
        case .greaterThan: operation = .greater
        case .greaterThanOrEqual: operation = .greaterOrEqual
        @unknown default: throw PredicateConversion.Failure.foundationOnly("comparison operator \(op)")
        }
        return Converted(.compare(operation, try c.convert(lhs).expression, try c.convert(rhs).expression))
    }
}

/// `a...b` and `a..<b` as predicate nodes.
protocol RangeNode {
    var bounds: (lower: Any, upper: Any, closed: Bool) { get }
}

extension PredicateExpressions.ClosedRange: QueryNode, RangeNode {
    var bounds: (lower: Any, upper: Any, closed: Bool) { (lower, upper, true) }
    var children: [Any] { [lower, upper] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        throw PredicateConversion.Failure.foundationOnly("a closed range outside contains")
    }
}

extension PredicateExpressions.Range: QueryNode, RangeNode {
    var bounds: (lower: Any, upper: Any, closed: Bool) { (lower, upper, false) }
    var children: [Any] { [lower, upper] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        throw PredicateConversion.Failure.foundationOnly("a range outside contains")
    }
}

/// A captured `Range` or `ClosedRange` value.
protocol RangeValue {
    var queryBounds: (lower: Any, upper: Any, closed: Bool) { get }
}

extension ClosedRange: RangeValue {
    var queryBounds: (lower: Any, upper: Any, closed: Bool) { (lowerBound, upperBound, true) }
}

extension Range: RangeValue {
    var queryBounds: (lower: Any, upper: Any, closed: Bool) { (lowerBound, upperBound, false) }
}

extension PredicateExpressions.RangeExpressionContains: QueryNode {
    var children: [Any] { [range, element] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        guard ordersAsQueryValue(Element.Output.self) else {
            throw PredicateConversion.Failure.foundationOnly("a range of \(Element.Output.self) values")
        }
        let element = try c.convert(self.element).expression
        if let node = range as? any RangeNode {
            let (lower, upper, closed) = node.bounds
            return Converted(
                .between(
                    element, lower: try c.convert(lower).expression, upper: try c.convert(upper).expression, closed: closed))
        }
        if let value = range as? any ValueNode, let captured = value.captured as? any RangeValue {
            let (lower, upper, closed) = captured.queryBounds
            return Converted(
                .between(element, lower: .constant(.make(lower)), upper: .constant(.make(upper)), closed: closed))
        }
        throw PredicateConversion.Failure.foundationOnly("contains on a \(PredicateConversion.name(of: range))")
    }
}

extension PredicateExpressions.SequenceContains: QueryNode {
    var children: [Any] { [sequence, element] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        Converted(.contains(try c.convert(sequence).expression, try c.convert(element).expression))
    }
}

extension PredicateExpressions.SequenceContainsWhere: QueryNode {
    var children: [Any] { [sequence, test] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        let base = try c.convert(sequence)
        let id = c.bind(variable.key, entity: c.entity(of: Element.self))
        return Converted(.any(base.expression, variable: id, try c.convert(test).expression))
    }
}

extension PredicateExpressions.SequenceAllSatisfy: QueryNode {
    var children: [Any] { [sequence, test] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        let base = try c.convert(sequence)
        let id = c.bind(variable.key, entity: c.entity(of: Element.self))
        return Converted(.all(base.expression, variable: id, try c.convert(test).expression))
    }
}

extension PredicateExpressions.Filter: QueryNode {
    var children: [Any] { [sequence, filter] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        let base = try c.convert(sequence)
        let id = c.bind(variable.key, entity: c.entity(of: Element.self))
        return Converted(.filter(base.expression, variable: id, try c.convert(filter).expression), entity: base.entity)
    }
}

extension PredicateExpressions.CollectionContainsCollection: QueryNode {
    var children: [Any] { [base, other] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        guard Base.Output.self is any StringProtocol.Type else {
            throw PredicateConversion.Failure.foundationOnly("contains on \(Base.Output.self)")
        }
        return Converted(.substring(try c.convert(base).expression, try c.convert(other).expression))
    }
}

extension PredicateExpressions.StringLocalizedStandardContains: QueryNode {
    var children: [Any] { [root, other] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        Converted(.localizedSubstring(try c.convert(root).expression, try c.convert(other).expression))
    }
}

extension PredicateExpressions.SequenceStartsWith: QueryNode {
    var children: [Any] { [base, prefix] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        guard Base.Output.self is any StringProtocol.Type else {
            throw PredicateConversion.Failure.foundationOnly("starts(with:) on \(Base.Output.self)")
        }
        return Converted(.prefix(try c.convert(base).expression, try c.convert(prefix).expression))
    }
}

extension PredicateExpressions.KeyPath: QueryNode {
    var children: [Any] { [root] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        let base = try c.convert(root)
        if let kind {
            switch kind {
            case .collectionCount: return Converted(.collection(base.expression, .count))
            case .collectionIsEmpty: return Converted(.collection(base.expression, .isEmpty))
            case .collectionFirst: return Converted(.collection(base.expression, .first), entity: base.entity)
            case .bidirectionalCollectionLast: return Converted(.collection(base.expression, .last), entity: base.entity)
            @unknown default: break
            }
        }
        let path = keyPath as AnyKeyPath
        let rootFacts = TypeFacts.of(Root.Output.self)
        guard let entity = base.entity, case .model = rootFacts.value else {
            if rootFacts.isScalar {
                throw PredicateConversion.Failure.foundationOnly("a member of \(Root.Output.self)")
            }
            return Converted(.member(base.expression, path), entity: c.entity(of: Output.self))
        }
        if let property = entity.property(at: path) {
            if property.isEphemeral {
                return Converted(.modelMember(base.expression, path))
            }
            return Converted(.property(base.expression, entity, property), entity: c.entity(of: Output.self))
        }
        if Output.self == PersistentIdentifier.self {
            return Converted(.identifier(base.expression, entity))
        }
        return Converted(.modelMember(base.expression, path), entity: c.entity(of: Output.self))
    }
}

extension Schema.Property {
    /// True for an `.ephemeral` attribute: tracked in memory, never stored.
    var isEphemeral: Bool { (self as? Schema.Attribute)?.options.contains(.ephemeral) == true }
}

extension PredicateExpressions.Variable: QueryNode {
    var children: [Any] { [] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        let bound = try c.variable(key)
        return Converted(.variable(bound.id), entity: bound.entity)
    }
}

/// A captured value, read without knowing its type.
protocol ValueNode {
    var captured: Any { get }
}

extension PredicateExpressions.Value: QueryNode, ValueNode {
    var captured: Any { value }
    var children: [Any] { [] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        Converted(.constant(.make(value)), entity: c.entity(of: Output.self))
    }
}

extension PredicateExpressions.NilLiteral: QueryNode {
    var children: [Any] { [] }
    func convert(_ c: inout PredicateConversion) throws -> Converted { Converted(.constant(.null)) }
}

extension PredicateExpressions.OptionalFlatMap: QueryNode {
    var children: [Any] { [wrapped, transform] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        let base = try c.convert(wrapped)
        let id = c.bind(variable.key, entity: c.entity(of: Wrapped.self))
        let body = try c.convert(transform)
        return Converted(.flatMap(base.expression, variable: id, body.expression), entity: body.entity)
    }
}

extension PredicateExpressions.NilCoalesce: QueryNode {
    var children: [Any] { [lhs, rhs] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        let first = try c.convert(lhs)
        return Converted(.coalesce(first.expression, try c.convert(rhs).expression), entity: first.entity)
    }
}

extension PredicateExpressions.ForcedUnwrap: QueryNode {
    var children: [Any] { [inner] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        let base = try c.convert(inner)
        return Converted(.unwrap(base.expression), entity: base.entity)
    }
}

extension PredicateExpressions.Conditional: QueryNode {
    var children: [Any] { [test, trueBranch, falseBranch] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        let yes = try c.convert(trueBranch)
        return Converted(
            .conditional(try c.convert(test).expression, yes.expression, try c.convert(falseBranch).expression),
            entity: yes.entity)
    }
}

/// Integer operations trap in Swift on overflow or a zero divisor.
private func integerRisk(_ type: Any.Type, _ what: String) -> String? {
    type is any FixedWidthInteger.Type ? what : nil
}

extension PredicateExpressions.Arithmetic: QueryNode {
    var children: [Any] { [lhs, rhs] }
    var trapRisk: String? { integerRisk(LHS.Output.self, "integer overflow") }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        let operation: QueryExpr.ArithmeticOperator
        switch op {
        case .add: operation = .add
        case .subtract: operation = .subtract
        case .multiply: operation = .multiply
        @unknown default: throw PredicateConversion.Failure.foundationOnly("arithmetic operator \(op)")
        }
        guard LHS.Output.self is any _KeyElementConvertible.Type else {
            throw PredicateConversion.Failure.foundationOnly("arithmetic on \(LHS.Output.self)")
        }
        return Converted(.arithmetic(operation, try c.convert(lhs).expression, try c.convert(rhs).expression))
    }
}

extension PredicateExpressions.IntDivision: QueryNode {
    var children: [Any] { [lhs, rhs] }
    var trapRisk: String? { "division by zero" }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        Converted(.arithmetic(.divide, try c.convert(lhs).expression, try c.convert(rhs).expression))
    }
}

extension PredicateExpressions.IntRemainder: QueryNode {
    var children: [Any] { [lhs, rhs] }
    var trapRisk: String? { "division by zero" }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        Converted(.arithmetic(.remainder, try c.convert(lhs).expression, try c.convert(rhs).expression))
    }
}

extension PredicateExpressions.FloatDivision: QueryNode {
    var children: [Any] { [lhs, rhs] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        guard LHS.Output.self is any _KeyElementConvertible.Type else {
            throw PredicateConversion.Failure.foundationOnly("division of \(LHS.Output.self)")
        }
        return Converted(.arithmetic(.divide, try c.convert(lhs).expression, try c.convert(rhs).expression))
    }
}

extension PredicateExpressions.UnaryMinus: QueryNode {
    var children: [Any] { [wrapped] }
    var trapRisk: String? { integerRisk(Wrapped.Output.self, "integer overflow") }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        guard Wrapped.Output.self is any _KeyElementConvertible.Type else {
            throw PredicateConversion.Failure.foundationOnly("negation of \(Wrapped.Output.self)")
        }
        return Converted(.negate(try c.convert(wrapped).expression))
    }
}

extension PredicateExpressions.SequenceMinimum: QueryNode {
    var children: [Any] { [elements] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        guard ordersAsQueryValue(Elements.Output.Element.self) else {
            throw PredicateConversion.Failure.foundationOnly("min() of \(Elements.Output.Element.self) values")
        }
        return Converted(.extreme(try c.convert(elements).expression, maximum: false))
    }
}

extension PredicateExpressions.SequenceMaximum: QueryNode {
    var children: [Any] { [elements] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        guard ordersAsQueryValue(Elements.Output.Element.self) else {
            throw PredicateConversion.Failure.foundationOnly("max() of \(Elements.Output.Element.self) values")
        }
        return Converted(.extreme(try c.convert(elements).expression, maximum: true))
    }
}

// Forms that would trap in `Predicate.evaluate` for some inputs.

extension PredicateExpressions.CollectionIndexSubscript: QueryNode {
    var children: [Any] { [wrapped, index] }
    var trapRisk: String? { "an index out of range" }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        throw PredicateConversion.Failure.unsupported("a collection subscript (traps on an index out of range)")
    }
}

extension PredicateExpressions.CollectionRangeSubscript: QueryNode {
    var children: [Any] { [wrapped, range] }
    var trapRisk: String? { "a range out of bounds" }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        throw PredicateConversion.Failure.unsupported("a collection range subscript (traps on a range out of bounds)")
    }
}

// Forms `Predicate.evaluate` runs safely; Strata leaves them to it.

extension PredicateExpressions.DictionaryKeySubscript: QueryNode {
    var children: [Any] { [wrapped, key] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        throw PredicateConversion.Failure.foundationOnly("a dictionary subscript")
    }
}

extension PredicateExpressions.DictionaryKeyDefaultValueSubscript: QueryNode {
    var children: [Any] { [wrapped, key, `default`] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        throw PredicateConversion.Failure.foundationOnly("a dictionary subscript")
    }
}

extension PredicateExpressions.TypeCheck: QueryNode {
    var children: [Any] { [input] }
    /// `$0 is BusinessTrip`: known for the fetched model, whose rows are
    /// read one entity at a time; left to Foundation for any other model.
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        guard let (entity, target) = try c.fetchedModelCast(input, to: Desired.self) else {
            throw PredicateConversion.Failure.foundationOnly("a type check")
        }
        return Converted(.constant(.scalar(.bool(entity.isKind(of: target)))))
    }
}

extension PredicateExpressions.ConditionalCast: QueryNode {
    var children: [Any] { [input] }
    /// `$0 as? BusinessTrip`: the fetched model itself for rows of that
    /// entity or below it, nil for the others.
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        guard let (entity, target) = try c.fetchedModelCast(input, to: Desired.self) else {
            throw PredicateConversion.Failure.foundationOnly("a conditional cast")
        }
        guard entity.isKind(of: target) else { return Converted(.constant(.null)) }
        return Converted(.variable(0), entity: entity)
    }
}

extension PredicateConversion {
    /// For a cast or type check of the fetched model (variable 0) to a
    /// model type of the schema: the entity being read and the one cast
    /// to. Nil for anything else.
    mutating func fetchedModelCast(_ input: Any, to type: Any.Type) throws -> (Schema.Entity, Schema.Entity)? {
        guard let target = entity(of: type), TypeFacts.of(type).modelType != nil else { return nil }
        let base = try convert(input)
        guard case .variable(0) = base.expression, let entity = base.entity else { return nil }
        return (entity, target)
    }
}

extension PredicateExpressions.StringContainsRegex: QueryNode {
    var children: [Any] { [subject, regex] }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        throw PredicateConversion.Failure.foundationOnly("a regular expression")
    }
}

extension PredicateExpressions.ForceCast: QueryNode {
    var children: [Any] { [input] }
    var trapRisk: String? { "a failed cast" }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        throw PredicateConversion.Failure.unsupported("a forced cast (as!)")
    }
}

// MARK: - Captured values

/// Implemented by `Optional` so that a captured value can be unwrapped
/// without knowing its type.
protocol OptionalValue {
    var wrappedValue: Any? { get }
}

extension Optional: OptionalValue {
    var wrappedValue: Any? { self.map { $0 as Any } }
}

extension QueryValue {
    /// The query value of a captured Swift value.
    static func make(_ value: Any) -> QueryValue {
        switch TypeFacts.of(type(of: value)).value {
        case .optional(let type):
            guard let wrapped = type.unwrap(value) else { return .null }
            return make(wrapped)
        case .key(let type): return type.keyElement(of: value).map(QueryValue.scalar) ?? makeOther(value)
        case .model(let type): return type.rowID(of: value).map(QueryValue.row) ?? makeOther(value)
        case .other: return makeOther(value)
        }
    }

    /// `make(_:)` for values of other types (optionals, key elements and
    /// models are `TypeFacts` kinds): arrays, enums, Codable values.
    private static func makeOther(_ value: Any) -> QueryValue {
        if let models = value as? [any PersistentModel] { return .rows(models.map { $0._strataState.rowID }) }
        if let raw = value as? any RawRepresentable, let key = raw.rawValue as? any _KeyElementConvertible {
            return .scalar(key._keyElement)
        }
        if let sequence = value as? any Sequence { return .list(elements(of: sequence).map(make)) }
        return .opaque(value)
    }

    private static func elements<S: Sequence>(of sequence: S) -> [Any] { sequence.map { $0 as Any } }
}

// MARK: - Predicates and expressions called from a predicate

/// A predicate or an expression that another predicate calls with
/// `evaluate`: its variables and its body, so that the call is translated
/// in place (and can use an index) instead of being left to Foundation.
protocol CalledBody {
    var variableKeys: [PredicateExpressions.VariableID] { get }
    var body: Any { get }
}

extension Predicate: CalledBody {
    var variableKeys: [PredicateExpressions.VariableID] {
        var keys: [PredicateExpressions.VariableID] = []
        for variable in repeat each variable { keys.append(variable.key) }
        return keys
    }
    var body: Any { expression }
}

extension Expression: CalledBody {
    var variableKeys: [PredicateExpressions.VariableID] {
        var keys: [PredicateExpressions.VariableID] = []
        for variable in repeat each variable { keys.append(variable.key) }
        return keys
    }
    var body: Any { expression }
}

extension PredicateConversion {
    /// The body of the predicate or expression `callee` (a captured value)
    /// with its variables bound to `inputs`. Each input must be a variable
    /// of this predicate (the model, or one a closure binds); anything else
    /// is left to Foundation's evaluation.
    mutating func inline(_ callee: Any, inputs: [Any]) throws -> Converted {
        guard let value = callee as? any ValueNode, let called = value.captured as? any CalledBody,
            called.variableKeys.count == inputs.count
        else { throw Failure.foundationOnly("evaluate of a predicate that is not a captured value") }
        for (key, input) in zip(called.variableKeys, inputs) {
            let converted = try convert(input)
            guard case .variable(let id) = converted.expression else {
                throw Failure.foundationOnly("evaluate with \(Self.name(of: input))")
            }
            variables[key] = (id, converted.entity)
        }
        return try convert(called.body)
    }

    /// The body of `callee` when it is a captured predicate or expression
    /// (for the trap-risk scan of a predicate Foundation evaluates).
    static func calledBody(_ callee: Any) -> [Any] {
        guard let value = callee as? any ValueNode, let called = value.captured as? any CalledBody else { return [] }
        return [called.body]
    }
}

extension PredicateExpressions.PredicateEvaluate: QueryNode {
    private var inputs: [Any] {
        var list: [Any] = []
        for element in repeat each input { list.append(element) }
        return list
    }
    var children: [Any] { [predicate] + inputs + PredicateConversion.calledBody(predicate) }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        try c.inline(predicate, inputs: inputs)
    }
}

extension PredicateExpressions.ExpressionEvaluate: QueryNode {
    private var inputs: [Any] {
        var list: [Any] = []
        for element in repeat each input { list.append(element) }
        return list
    }
    var children: [Any] { [expression] + inputs + PredicateConversion.calledBody(expression) }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        try c.inline(expression, inputs: inputs)
    }
}

extension PredicateExpressions.CapturedExpressionEvaluate: QueryNode {
    var children: [Any] { [expression, input] + PredicateConversion.calledBody(expression) }
    func convert(_ c: inout PredicateConversion) throws -> Converted {
        try c.inline(expression, inputs: [input])
    }
}
