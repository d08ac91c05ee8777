import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@ModelActor`: an actor that owns a `ModelContext` on a container and runs
/// on that context's serial executor, for background work.
public struct ModelActorMacro: MemberMacro, ExtensionMacro {
    /// Adds the actor's `modelExecutor`, `modelContainer` and
    /// `init(modelContainer:)`, which makes a context on the container and a
    /// `DefaultSerialModelExecutor` for it. The members are public or package
    /// when the actor is. Throws when attached to anything but an actor.
    public static func expansion(
        of node: AttributeSyntax,
        providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let actor = declaration.as(ActorDeclSyntax.self) else {
            throw DiagnosticsError(node, .modelActorNotAnActor)
        }
        // The members take the actor's access level (public and package
        // actors need them visible to satisfy `ModelActor` outside).
        let access = actor.modifiers.first { modifier in
            [.keyword(.public), .keyword(.open), .keyword(.package)].contains(modifier.name.tokenKind)
        }
        let level = access.map { $0.name.tokenKind == .keyword(.package) ? "package " : "public " } ?? ""
        return [
            "\(raw: level)nonisolated let modelExecutor: any Strata.ModelExecutor",
            "\(raw: level)nonisolated let modelContainer: Strata.ModelContainer",
            """
            \(raw: level)init(modelContainer: Strata.ModelContainer) {
                let modelContext = Strata.ModelContext(modelContainer)
                self.modelExecutor = Strata.DefaultSerialModelExecutor(modelContext: modelContext)
                self.modelContainer = modelContainer
            }
            """,
        ]
    }

    /// Adds an extension conforming the actor to `ModelActor`.
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
