import SwiftSyntax

/// What the macros need to know about one `var`/`let` member of a model.
struct StoredProperty {
    var declaration: VariableDeclSyntax
    var name: String
    /// The declared type, or one inferred from a literal initializer.
    var type: TypeSyntax?
    var initializer: ExprSyntax?
    /// The `@Attribute(...)` or `@Relationship(...)` attribute, if any.
    var attribute: AttributeSyntax?
    var relationship: AttributeSyntax?

    /// The member declarations of `members` that are persisted, in
    /// declaration order (their position is their field number).
    static func persisted(in members: MemberBlockItemListSyntax) -> [StoredProperty] {
        members.compactMap { item in
            guard let variable = item.decl.as(VariableDeclSyntax.self) else { return nil }
            return StoredProperty(persisted: variable)
        }
    }

    /// Nil unless `variable` is a single stored instance property that is
    /// not `@Transient` (statics, lazy, computed and transient properties
    /// are not persisted). A `let` is persisted: it is set once, by the
    /// class's initializer or from the record.
    init?(persisted variable: VariableDeclSyntax) {
        guard !variable.isStatic, !variable.hasAttribute("Transient"),
            !variable.modifiers.contains(where: { $0.name.tokenKind == .keyword(.lazy) }),
            variable.bindings.count == 1, let binding = variable.bindings.first,
            let identifier = binding.pattern.as(IdentifierPatternSyntax.self)
        else { return nil }
        // Computed properties are not persisted; observed ones (willSet/didSet) are.
        if variable.isComputed { return nil }
        declaration = variable
        isLet = variable.bindingSpecifier.tokenKind == .keyword(.let)
        name = identifier.identifier.trimmedDescription.trimmingBackticks
        initializer = binding.initializer?.value.trimmed
        type = binding.typeAnnotation?.type.trimmed
        attribute = variable.attribute(named: "Attribute")
        relationship = variable.attribute(named: "Relationship")
    }

    /// A `let`: stored and read, never changed, so neither observed nor
    /// tracked.
    var isLet: Bool

    /// The member that holds the value: a `var`'s private stored peer, a
    /// `let` itself.
    var storageName: String { isLet ? name : "_" + name }

    /// `@Attribute(.ephemeral)`: tracked, not stored.
    var isEphemeral: Bool { option(named: "ephemeral") }

    /// For `@Attribute(.transformable(by: X))`, an expression for that
    /// option as Strata's `Schema.Attribute.Option`, which the generated
    /// record code passes on; nil for any other property.
    var transformerOption: String? {
        guard case .argumentList(let arguments)? = attribute?.arguments else { return nil }
        for argument in arguments where argument.label == nil {
            guard let call = argument.expression.as(FunctionCallExprSyntax.self),
                call.calledExpression.as(MemberAccessExprSyntax.self)?.declName.baseName.text == "transformable"
            else { continue }
            return "Strata.Schema.Attribute.Option.transformable(\(call.arguments.trimmedDescription))"
        }
        return nil
    }

    private func option(named name: String) -> Bool {
        guard case .argumentList(let arguments)? = attribute?.arguments else { return false }
        return arguments.contains { argument in
            argument.label == nil
                && argument.expression.as(MemberAccessExprSyntax.self)?.declName.baseName.text == name
        }
    }

    /// The type as it may be written in an expression (`T!` becomes
    /// `Optional<T>`), or nil when the declaration has no annotation.
    var expressionType: TypeSyntax? {
        guard let type else { return nil }
        if let iuo = type.as(ImplicitlyUnwrappedOptionalTypeSyntax.self) {
            return "Optional<\(iuo.wrappedType.trimmed)>"
        }
        return type
    }

    /// An expression for the property's type as a metatype: `T.self`, or
    /// for a declaration without annotation (`var count = 0`) the static
    /// type of its peer, which has the same initial value.
    var metatypeExpression: String {
        if let expressionType { return "(\(expressionType.trimmedDescription)).self" }
        return "Swift.type(of: self.\(storageName))"
    }
}

extension String {
    var trimmingBackticks: String {
        hasPrefix("`") && hasSuffix("`") && count > 1 ? String(dropFirst().dropLast()) : self
    }
}

extension VariableDeclSyntax {
    var isStatic: Bool {
        modifiers.contains { $0.name.tokenKind == .keyword(.static) || $0.name.tokenKind == .keyword(.class) }
    }

    /// True when a binding has a getter (not only `willSet`/`didSet` observers).
    var isComputed: Bool {
        bindings.contains { binding in
            switch binding.accessorBlock?.accessors {
            case nil: return false
            case .getter: return true
            case .accessors(let list):
                return list.contains { !["willSet", "didSet"].contains($0.accessorSpecifier.text) }
            }
        }
    }

    func attribute(named name: String) -> AttributeSyntax? {
        for element in attributes {
            if case .attribute(let attribute) = element, attribute.attributeName.simpleName == name {
                return attribute
            }
        }
        return nil
    }

    func hasAttribute(_ name: String) -> Bool { attribute(named: name) != nil }
}

extension TypeSyntax {
    /// `Transient` for both `Transient` and `Strata.Transient`.
    var simpleName: String {
        if let member = self.as(MemberTypeSyntax.self) { return member.name.text }
        if let identifier = self.as(IdentifierTypeSyntax.self) { return identifier.name.text }
        return trimmedDescription
    }
}
