import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@_PersistedProperty(n)`, added by `@Model` to each persisted property.
///
/// The property becomes computed over a private stored peer `_name` of the
/// same type. The `init` accessor lets the class's own initializers (and the
/// property's default value) assign it before the object is complete; `get`
/// registers observation and resolves a not-yet-loaded relationship (or an
/// attribute a fetch's `propertiesToFetch` left out); `set`
/// notifies observers and tells the model's state that field `n` changed.
public struct PersistedPropertyMacro: AccessorMacro, PeerMacro {
    /// The property's `init`, `get` and `set` accessors over its stored peer,
    /// as described above.
    public static func expansion(
        of node: AttributeSyntax,
        providingAccessorsOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AccessorDeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self),
            let property = StoredProperty(persisted: variable),
            let index = fieldNumber(node)
        else { return [] }
        let name = property.name
        // The class's own fields start where its superclass's end (at 0
        // for a class without a model superclass, which the optimizer
        // folds away).
        let field = "\(ModelMacro.layout).first + \(index)"
        return [
            """
            @storageRestrictions(initializes: _\(raw: name))
            init(initialValue) {
                _\(raw: name) = initialValue
            }
            """,
            """
            get {
                _strataState.access(self, keyPath: \\.\(raw: name))
                if _strataState.hasFaults {
                    _strataState.loadIfUnloaded(self, field: \(raw: field))
                    _strataState.resolve(&_\(raw: name), field: \(raw: field))
                }
                return _\(raw: name)
            }
            """,
            """
            set {
                \(raw: setterBody(name: name, field: field, newValue: "newValue"))
            }
            """,
        ]
    }

    /// The private stored peer `_name`: of the property's type, or, when the
    /// property has no type annotation, with its initial value. None for a
    /// `let`.
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self),
            let property = StoredProperty(persisted: variable), !property.isLet
        else { return [] }
        // `T!` is kept as `Optional<T>`: generic code that reads the peer
        // sees an optional, never a value to unwrap.
        // `T?` is spelled `Optional<T>` when the property has an initial
        // value: a `T?` peer would start as nil on its own, and Swift would
        // then skip the init accessor that stores the initial value.
        if var type = property.expressionType {
            if property.initializer != nil, let optional = type.as(OptionalTypeSyntax.self) {
                type = "Optional<\(optional.wrappedType.trimmed)>"
            }
            return ["@Transient nonisolated(unsafe) private var _\(raw: property.name): \(type)"]
        }
        // No annotation (`var count = 0`): the peer takes its type from the
        // same initial value, as the property does.
        guard let initial = property.initializer else { return [] }
        return ["@Transient nonisolated(unsafe) private var _\(raw: property.name) = \(initial)"]
    }

    /// What setting property `name` (field `field`) to `newValue` does:
    /// the inverse's and the undo manager's bookkeeping, the change under
    /// observation, then change tracking. The setter runs it, and so does
    /// `@Model`'s `_strataSetRelationship`, which is nonisolated and so
    /// cannot call a setter that default main-actor isolation isolates.
    static func setterBody(name: String, field: String, newValue: String) -> String {
        """
        if _strataState.hasFaults { _strataState.loadBeforeSet(self, field: \(field)) }
        let _old = _strataState.willSet(&self._\(name), field: \(field))
        _strataState.registerUndo(self, keyPath: \\.\(name), old: self._\(name))
        _strataState.withMutation(of: self, keyPath: \\.\(name)) {
            self._\(name) = \(newValue)
        }
        _strataState.didChange(self, field: \(field))
        _strataState.didSet(self, field: \(field), old: _old, new: \(newValue))
        """
    }

    private static func fieldNumber(_ node: AttributeSyntax) -> Int? {
        guard case .argumentList(let arguments) = node.arguments,
            let literal = arguments.first?.expression.as(IntegerLiteralExprSyntax.self)
        else { return nil }
        return Int(literal.literal.text)
    }
}

/// `@Attribute`, `@Relationship` and `@Transient` only mark a property;
/// `@Model` reads them. They expand to nothing themselves.
public struct MarkerMacro: PeerMacro {
    /// Nothing: `@Model` reads the marker.
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] { [] }
}

/// `#Unique` and `#Index` are read by `@Model` from the class body; in
/// place they expand to nothing.
public struct ConstraintMacro: DeclarationMacro {
    /// Nothing; throws when an argument is not an array literal.
    public static func expansion(
        of node: some FreestandingMacroExpansionSyntax,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        for argument in node.arguments where !argument.expression.is(ArrayExprSyntax.self) {
            throw DiagnosticsError(argument, .constraintArgument)
        }
        return []
    }
}
