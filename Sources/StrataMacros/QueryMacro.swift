import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@Query(...) var trips: [Trip]`, as SwiftData's `@Query` macro: the
/// property becomes a getter over a peer `_trips` of type
/// `Query<Trip, [Trip]>` made with the attribute's arguments.
///
/// A macro rather than a property wrapper, as SwiftData's is, so that the
/// model type comes from the property's declared type: `@Query var trips:
/// [Trip]` names no model anywhere else, and a property wrapper's
/// generic `Query<Element, Result>` could not infer `Element`.
public struct QueryMacro: AccessorMacro, PeerMacro {
    /// `get { _name.wrappedValue }`.
    public static func expansion(
        of node: AttributeSyntax,
        providingAccessorsOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AccessorDeclSyntax] {
        guard let (name, _) = try queried(declaration) else { return [] }
        return ["get { _\(raw: name).wrappedValue }"]
    }

    /// `var _name = Strata.Query<Element, [Element]>(arguments)`.
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let (name, element) = try queried(declaration) else { return [] }
        let arguments = node.arguments?.as(LabeledExprListSyntax.self)?.trimmedDescription ?? ""
        let type = "Strata.Query<\(element), [\(element)]>"
        return ["private var _\(raw: name): \(raw: type) = \(raw: type)(\(raw: arguments))"]
    }

    /// The property's name and model type; throws when the declaration is
    /// not one `var` of an array type.
    private static func queried(_ declaration: some DeclSyntaxProtocol) throws -> (String, String)? {
        guard let variable = declaration.as(VariableDeclSyntax.self) else {
            throw DiagnosticsError(declaration, .queryDeclaration)
        }
        guard variable.bindings.count == 1, let binding = variable.bindings.first,
            let name = binding.pattern.as(IdentifierPatternSyntax.self)?.identifier.trimmedDescription,
            binding.initializer == nil, let annotation = binding.typeAnnotation?.type
        else { throw DiagnosticsError(declaration, .queryDeclaration) }
        if let array = annotation.as(ArrayTypeSyntax.self) { return (name, array.element.trimmedDescription) }
        if let generic = annotation.as(IdentifierTypeSyntax.self), generic.name.text == "Array",
            let argument = generic.genericArgumentClause?.arguments.first, generic.genericArgumentClause?.arguments.count == 1
        {
            return (name, argument.argument.trimmedDescription)
        }
        throw DiagnosticsError(declaration, .queryDeclaration)
    }
}
