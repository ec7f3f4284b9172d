// The share dialog: the owner of a session shares it with other users
// (viewer or collaborator) and revokes shares (see the README's
// "Sharing a session").
import { api, type Role, type Session } from "./api";
import { button, h, toast } from "./dom";

const roleHelp: Record<Role, string> = {
  owner: "owns the session",
  viewer: "sees the cells, outputs and files",
  collaborator: "also runs cells, writes files and interrupts",
};

export function shareDialog(session: Session, myID: string): void {
  const list = h("table", { class: "shares", "aria-label": "who the session is shared with" });
  const user = h("input", { id: "share-user", required: true, autocomplete: "off", placeholder: "user id" });
  const role = h("select", { id: "share-role" },
    h("option", { value: "viewer" }, `viewer: ${roleHelp.viewer}`),
    h("option", { value: "collaborator" }, `collaborator: ${roleHelp.collaborator}`));
  const form = h("form", { class: "share-form", "aria-label": "share with a user" },
    h("label", { for: "share-user" }, "User id "), user, " ",
    h("label", { for: "share-role" }, "as "), role, " ",
    h("button", { type: "submit" }, "Share"));
  const refresh = async () => {
    try {
      const { shares } = await api.shares(session.id);
      list.replaceChildren(h("tr", {}, h("th", { scope: "col" }, "User"), h("th", { scope: "col" }, "Role"), h("th", { scope: "col" }, "")));
      if (shares.length === 0) list.append(h("tr", {}, h("td", { colspan: "3", class: "muted" }, "Not shared with anyone.")));
      for (const s of shares) {
        list.append(h("tr", { "data-share": s.user_id }, h("td", {}, s.user_id), h("td", { title: roleHelp[s.role] }, s.role),
          h("td", {}, button("Revoke", async () => {
            try {
              await api.unshare(session.id, s.user_id);
            } catch (e) {
              toast((e as Error).message);
            }
            refresh();
          }, { title: `revoke the share of ${s.user_id}` }))));
      }
    } catch (e) {
      toast((e as Error).message);
    }
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await api.share(session.id, user.value.trim(), role.value as Role);
      user.value = "";
      refresh();
    } catch (x) {
      toast((x as Error).message);
    }
  });
  const dlg = h("dialog", { class: "help share", "aria-label": "share the session" },
    h("h2", {}, "Share this session"),
    h("p", { class: "muted" }, `Everything done in the session counts as yours (queue, CPU budget, history); each cell records who ran it. Your user id is ${myID}.`),
    list, form,
    button("Close", () => dlg.close(), { title: "close the share dialog" }));
  dlg.addEventListener("close", () => dlg.remove());
  document.body.append(dlg);
  dlg.showModal();
  refresh();
}
