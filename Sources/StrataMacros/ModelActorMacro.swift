import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@ModelActor`: an actor that owns a `ModelContext` on a container and runs
/// on that context's serial executor, for background work.
public struct ModelActorMacro: MemberMacro, ExtensionMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard declaration.is(ActorDeclSyntax.self) else {
            throw DiagnosticsError(node, .modelActorNotAnActor)
        }
        return [
            "nonisolated let modelExecutor: any Strata.ModelExecutor",
            "nonisolated let modelContainer: Strata.ModelContainer",
            """
            init(modelContainer: Strata.ModelContainer) {
                let modelContext = Strata.ModelContext(modelContainer)
                self.modelExecutor = Strata.DefaultSerialModelExecutor(modelContext: modelContext)
                self.modelContainer = modelContainer
            }
            """,
        ]
    }

    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        guard declaration.is(ActorDeclSyntax.self) else { return [] }
        return [try ExtensionDeclSyntax("extension \(type.trimmed): Strata.ModelActor {}")]
    }
}
